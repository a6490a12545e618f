import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster } from 'ioredis';
import { partitionStreams } from '@nest-redis-resilience/stream-batch-ack';
import { LocalCluster, startLocalCluster } from '../../scripts/lib/local-cluster';
import { freePort } from '../../support/throwaway-redis';
import { waitFor } from '../support/wait';
import { AppProcess } from '../../support/app-process';
import { candleTotals, firstPrices, runCollector, writeTicks } from './support';

/*
 * `npm run demo:cluster` as a test, on a throwaway Redis Cluster of 3 masters
 * and 3 replicas: 3 shortener instances on one SQLite file, 3 ticks consumers in one group over
 * the stream `ticks` split into 6 partitions, and the collector (replaying files this test
 * writes, so that the expected candles are known) partitioning by symbol. The apps run from their
 * sources as child processes. Counts, never durations, are asserted.
 */
describe('both demos on a Redis Cluster (npm run demo:cluster)', () => {
  jest.setTimeout(170_000);
  const PARTITIONS = 6;
  const CACHE_TTL_MS = 10_000;
  let cluster: LocalCluster;
  let redis: Cluster;
  let dir: string;
  const shorteners: AppProcess[] = [];
  const consumers: AppProcess[] = [];
  let ticksEnv: Record<string, string>;
  const hotCodes: string[] = [];

  /** Ticks consumer i (consumer-<i + 1>) on `port`. */
  const ticksConsumer = (i: number, port: number) =>
    new AppProcess(
      `consumer-${i + 1}`,
      'ticks',
      {
        ...ticksEnv,
        PORT: String(port),
        COLLECTOR: 'false',
        TICKS_CONSUMER: `consumer-${i + 1}`,
        // Acks every second: a consumer killed mid-stream leaves entries pending for sure.
        ACK_INTERVAL_MS: '1000',
        ACK_BATCH_SIZE: '100000',
        // Its entries are claimed after 3 s; its in-progress records block for 3 s at most.
        CLAIM_MIN_IDLE_MS: '3000',
        IDEMPOTENCY_LOCK_MS: '3000',
      },
      `http://127.0.0.1:${port}`,
    );

  beforeAll(async () => {
    cluster = await startLocalCluster({ masters: 3, replicasPerMaster: 1 });
    redis = new Cluster(cluster.nodes);
    dir = mkdtempSync(join(tmpdir(), 'cluster-demo-e2e-'));
    const common = { HOST: '127.0.0.1', REDIS_CLUSTER_NODES: cluster.nodesEnv };
    const database = `sqlite:${join(dir, 'shortener.sqlite')}`;
    ticksEnv = {
      ...common,
      LOG_LEVEL: 'warn',
      TICKS_STREAM: 'ticks',
      TICKS_PARTITIONS: String(PARTITIONS),
      TICKS_KEY_PREFIX: 'e2e:',
    };
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      shorteners.push(
        new AppProcess(
          `shortener-${i + 1}`,
          'shortener',
          { ...common, PORT: String(port), DATABASE_URL: database, CACHE_TTL: `${CACHE_TTL_MS}ms` },
          `http://127.0.0.1:${port}`,
        ),
      );
    }
    for (let i = 0; i < 3; i++) consumers.push(ticksConsumer(i, await freePort()));
    await Promise.all([
      ...shorteners.map((s) => s.ready('/health/ready')),
      ...consumers.map((c) => c.ready('/health')),
    ]);
  });

  afterAll(async () => {
    await Promise.all([...shorteners, ...consumers].map((p) => p.stop('SIGTERM', 3000)));
    redis?.disconnect();
    await cluster?.stop(500);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const lookups = async () => {
    const counts = await Promise.all(
      shorteners.map((s) => s.metric('shortener_db_lookups_total', { result: 'found' })),
    );
    return counts.reduce((a, b) => a + b, 0);
  };

  /** 20 concurrent redirects of each code on each instance; every answer must be a 302. */
  const burst = async (codes: string[]) => {
    const statuses = await Promise.all(
      codes.flatMap((code) =>
        shorteners.flatMap((s) =>
          Array.from({ length: 20 }, () =>
            fetch(`${s.url}/${code}`, { redirect: 'manual' }).then((r) => r.status),
          ),
        ),
      ),
    );
    expect(new Set(statuses)).toEqual(new Set([302]));
  };

  it('shortener: one database lookup per hot code per TTL across the 3 instances', async () => {
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${shorteners[i % 3].url}/urls`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ url: `https://example.com/hot/${i}` }),
      });
      expect(res.status).toBe(201);
      hotCodes.push(((await res.json()) as { code: string }).code);
    }
    const before = await lookups();
    await burst(hotCodes); // 300 redirects
    expect((await lookups()) - before).toBe(hotCodes.length);
    await burst(hotCodes); // still cached
    expect((await lookups()) - before).toBe(hotCodes.length);
    // Past the TTL (+10 % jitter): one more lookup per code, still across all three instances.
    await new Promise((r) => setTimeout(r, CACHE_TTL_MS * 1.1 + 1000));
    await burst(hotCodes);
    expect((await lookups()) - before).toBe(2 * hotCodes.length);
  });

  const handled = () => Promise.all(consumers.map((c) => c.metric('ticks_handled_total')));

  /** Waits until every symbol's candles hold exactly the expected volume and trades. */
  const expectExactCandles = async (expected: Map<string, { volume: number; trades: number }>) => {
    const reader = consumers.find((c) => c.running)!;
    let totals = new Map<string, { volume: number; trades: number }>();
    await waitFor(
      'the candles to hold every published tick',
      async () => {
        totals = await candleTotals(reader.url!, expected.keys());
        return [...expected].every(
          ([s, e]) => totals.get(s)?.trades === e.trades && totals.get(s)?.volume === e.volume,
        );
      },
      60_000,
      500,
    ).catch(() => undefined);
    expect(Object.fromEntries(totals)).toEqual(Object.fromEntries(expected));
  };

  it('ticks: every tick counted exactly once, the 3 consumers sharing the partitions', async () => {
    const ticks = writeTicks(join(dir, 'a.jsonl'), 'A', 30, 3000);
    const before = await handled();
    const stats = await runCollector(ticksEnv, ticks.file);
    expect(stats).toMatchObject({ published: 3000, failed: 0 });
    await expectExactCandles(ticks.expected);
    const after = await handled();
    const perConsumer = after.map((n, i) => n - before[i]);
    // Applied once in total (a duplicate would be skipped, not applied), by all three.
    expect(perConsumer.reduce((a, b) => a + b, 0)).toBe(3000);
    for (const n of perConsumer) expect(n).toBeGreaterThan(0);
    // The ticks page's feed reads the latest prices of symbols in every partition (slot).
    const prices = await firstPrices(consumers[1].url!);
    expect(prices.map((p) => p.symbol)).toEqual(expect.arrayContaining([...ticks.expected.keys()]));
    // The partitions' streams are spread over the three masters.
    const owners = new Set(
      await Promise.all(
        partitionStreams('ticks', PARTITIONS).map(async (stream) => {
          const slot = Number(await redis.call('CLUSTER', 'KEYSLOT', stream));
          const node = redis.slots[slot]?.[0];
          return node;
        }),
      ),
    );
    expect(owners.size).toBe(3);
  });

  /** Pending entries of `consumer` over every partition. */
  const pendingOf = async (consumer: string) => {
    let pending = 0;
    for (const stream of partitionStreams('ticks', PARTITIONS)) {
      const rows = (await redis.call('XINFO', 'CONSUMERS', stream, 'candles')) as unknown[][];
      for (const row of rows) {
        const f: Record<string, unknown> = {};
        for (let i = 0; i + 1 < row.length; i += 2) f[String(row[i])] = row[i + 1];
        if (f.name === consumer) pending += Number(f.pending);
      }
    }
    return pending;
  };

  it('SIGKILL of a consumer hands its pending entries to the others; the candles stay exact', async () => {
    const ticks = writeTicks(join(dir, 'b.jsonl'), 'B', 30, 20_000);
    const victim = consumers[2];
    const start = (await handled())[2];
    let pendingAtKill = 0;
    const stats = await runCollector(ticksEnv, ticks.file, () => {
      void (async () => {
        await waitFor(
          'consumer-3 to handle ticks',
          async () => (await victim.metric('ticks_handled_total')) - start > 300,
          60_000,
          50,
        );
        victim.child.kill('SIGKILL');
        await victim.exited;
        pendingAtKill = await pendingOf('consumer-3');
      })();
    });
    expect(stats).toMatchObject({ published: 20_000, failed: 0 });
    await waitFor('consumer-3 killed', () => !victim.running, 60_000, 100);
    await expectExactCandles(ticks.expected);
    process.stdout.write(
      `[cluster-demo] consumer-3 killed with ${pendingAtKill} entries pending; claimed by the others\n`,
    );
    expect(pendingAtKill).toBeGreaterThan(0);
    await waitFor('its pending entries claimed', async () => (await pendingOf('consumer-3')) === 0);

    // Restarted: it gets its share of the partitions back (each has one owner), and the candles
    // of the ticks that follow are exact too.
    const restarted = ticksConsumer(2, Number(new URL(victim.url!).port));
    consumers[2] = restarted;
    await restarted.ready('/health');
    await waitFor(
      'the partitions spread over the 3 consumers again',
      async () => {
        const owned = await Promise.all(consumers.map(ownedPartitions));
        return owned.every((o) => o.length === PARTITIONS / 3);
      },
      60_000,
      250,
    );
    const after = writeTicks(join(dir, 'b2.jsonl'), 'R', 30, 5000);
    const before = (await handled())[2];
    expect(await runCollector(ticksEnv, after.file)).toMatchObject({
      published: 5000,
      failed: 0,
    });
    await expectExactCandles(after.expected);
    expect((await handled())[2] - before).toBeGreaterThan(0);
  }, 300_000);

  /** The partitions a consumer owns, from its health details. */
  const ownedPartitions = async (consumer: AppProcess): Promise<number[]> => {
    const res = await fetch(`${consumer.url}/health`);
    const body = (await res.json()) as { details?: { stream?: { owned?: number[] } } };
    return body.details?.stream?.owned ?? [];
  };

  it('a master failover (CLUSTER FAILOVER on a replica) loses no acknowledged tick, and no cached redirect hangs', async () => {
    const ticks = writeTicks(join(dir, 'c.jsonl'), 'C', 30, 20_000);
    await burst(hotCodes); // cached again (one lookup per code at most)
    const { replicas } = await cluster.roles();
    let failingOver = true;
    const redirects: number[] = [];
    const hammer = (async () => {
      while (failingOver) {
        const answers = await Promise.all(
          shorteners.map((s, i) =>
            fetch(`${s.url}/${hotCodes[i % hotCodes.length]}`, {
              redirect: 'manual',
              // A hang would be a timeout here: the app answers from the database within its
              // Redis operation timeout (500 ms) when the cache does not answer.
              signal: AbortSignal.timeout(15_000),
            }).then((r) => r.status),
          ),
        );
        redirects.push(...answers);
      }
    })();
    const stats = await runCollector(ticksEnv, ticks.file, () => {
      setTimeout(() => {
        void cluster.failover(replicas[0].port).finally(() => {
          setTimeout(() => (failingOver = false), 1000);
        });
      }, 300);
    });
    await waitFor('the failover', () => !failingOver, 60_000, 100);
    await hammer;
    process.stdout.write(
      `[cluster-demo] failover of ${replicas[0].masterPort} to ${replicas[0].port}: ${stats.published} ticks acknowledged, ${stats.failed} XADDs failed; ${redirects.length} redirects during it\n`,
    );
    expect(redirects.length).toBeGreaterThan(0);
    expect(new Set(redirects)).toEqual(new Set([302]));
    expect((await cluster.roles()).masters).toContain(replicas[0].port);
    // Every acknowledged XADD is in the candles, and nothing else.
    expect(stats.published + stats.failed).toBe(20_000);
    const reader = consumers[0];
    let total = { volume: 0, trades: 0 };
    await waitFor(
      'the candles to hold every acknowledged tick',
      async () => {
        const totals = await candleTotals(reader.url!, ticks.expected.keys());
        total = [...totals.values()].reduce(
          (a, b) => ({ volume: a.volume + b.volume, trades: a.trades + b.trades }),
          { volume: 0, trades: 0 },
        );
        return total.trades >= stats.published;
      },
      60_000,
      500,
    ).catch(() => undefined);
    expect(total).toEqual({ volume: stats.volume, trades: stats.published });
    if (stats.failed === 0) await expectExactCandles(ticks.expected);
  });
});
