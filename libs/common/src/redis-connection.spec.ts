import { Cluster, Redis } from 'ioredis';
import { isClusterTarget, redisClientOf } from './redis-connection';

// Every client here is lazy and never connects: only the options it was built with are checked.
describe('redisClientOf', () => {
  const made: (Redis | Cluster)[] = [];
  const keep = <T extends Redis | Cluster>(c: T) => (made.push(c), c);
  afterAll(() => made.forEach((c) => c.disconnect()));

  it('a URL or options: defaults under the user options, overrides over them', () => {
    const a = redisClientOf('redis://127.0.0.1:6390', {
      defaults: { connectTimeout: 1234, lazyConnect: true },
      overrides: { maxRetriesPerRequest: null },
    });
    expect(a.owned).toBe(true);
    const ra = keep(a.client as Redis);
    expect(ra.options).toMatchObject({
      port: 6390,
      connectTimeout: 1234,
      maxRetriesPerRequest: null,
    });
    const b = redisClientOf(
      { port: 6391, connectTimeout: 99, lazyConnect: true, maxRetriesPerRequest: 3 },
      { defaults: { connectTimeout: 1234 }, overrides: { maxRetriesPerRequest: null } },
    );
    expect(keep(b.client as Redis).options).toMatchObject({
      port: 6391,
      connectTimeout: 99,
      maxRetriesPerRequest: null,
    });
  });

  it('{ cluster }: a Cluster, retryStrategy as its clusterRetryStrategy, the rest per node', () => {
    const retry = (times: number) => times * 7;
    const { client, owned } = redisClientOf(
      {
        cluster: [{ host: '127.0.0.1', port: 7000 }],
        clusterOptions: { redisOptions: { db: 0, connectTimeout: 99 } },
      },
      {
        defaults: { connectTimeout: 1234, disconnectTimeout: 500 },
        overrides: { retryStrategy: retry, lazyConnect: true },
      },
    );
    expect(owned).toBe(true);
    const cluster = keep(client as Cluster);
    expect(cluster).toBeInstanceOf(Cluster);
    expect(cluster.options.lazyConnect).toBe(true);
    expect(cluster.options.clusterRetryStrategy?.(3)).toBe(21);
    expect(cluster.options.redisOptions).toMatchObject({
      connectTimeout: 99,
      disconnectTimeout: 500,
    });
    expect(cluster.options.redisOptions).not.toHaveProperty('retryStrategy');
  });

  it('a given client: shared as it is (not owned), or duplicated with the overrides (owned)', () => {
    const given = keep(new Redis({ port: 6392, lazyConnect: true, connectTimeout: 77 }));
    expect(redisClientOf(given)).toEqual({ client: given, owned: false });
    const dup = redisClientOf(given, {
      givenClient: 'duplicate',
      overrides: { maxRetriesPerRequest: null },
    });
    expect(dup.owned).toBe(true);
    expect(dup.client).not.toBe(given);
    expect(keep(dup.client as Redis).options).toMatchObject({
      port: 6392,
      connectTimeout: 77,
      maxRetriesPerRequest: null,
    });
    expect(given.options.maxRetriesPerRequest).not.toBeNull();

    const givenCluster = keep(
      new Cluster([{ host: '127.0.0.1', port: 7001 }], {
        lazyConnect: true,
        redisOptions: { connectTimeout: 55 },
      }),
    );
    const dupCluster = redisClientOf(givenCluster, {
      givenClient: 'duplicate',
      overrides: { disconnectTimeout: 10 },
    });
    expect(dupCluster.owned).toBe(true);
    expect(keep(dupCluster.client as Cluster).options.redisOptions).toMatchObject({
      connectTimeout: 55,
      disconnectTimeout: 10,
    });
    expect(isClusterTarget(givenCluster)).toBe(true);
    expect(isClusterTarget(given)).toBe(false);
    expect(isClusterTarget({ cluster: [] })).toBe(true);
  });
});
