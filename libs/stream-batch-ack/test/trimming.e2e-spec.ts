import { Redis } from 'ioredis';
import { lastValueFrom } from 'rxjs';
import { ClientRedisStreams } from '@nest-redis-resilience/stream-batch-ack';
import { deleteKeys, randomPrefix, readAll, REDIS_URL } from './support/helpers';

const prefix = randomPrefix('trim');

describe('ClientRedisStreams maxLen trimming (inspects XINFO/XPENDING state)', () => {
  let redis: Redis;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  async function readGroup(stream: string, group: string, count: number): Promise<string[]> {
    const reply = (await redis.xreadgroup(
      'GROUP',
      group,
      'c',
      'COUNT',
      count,
      'STREAMS',
      stream,
      '>',
    )) as [string, [string, string[]][]][] | null;
    return reply ? reply[0][1].map(([id]) => id) : [];
  }

  it('with a lagging group, trimming deletes nothing that group has not acked; once it catches up the stream shrinks to maxLen', async () => {
    const stream = `${prefix}ticks`;
    await redis.call('XGROUP', 'CREATE', stream, 'fast', '0', 'MKSTREAM');
    await redis.call('XGROUP', 'CREATE', stream, 'lagging', '0');
    const client = new ClientRedisStreams({ connection: REDIS_URL, maxLen: 10, trimEvery: 10 });
    await client.connect();

    const ids: string[] = [];
    for (let n = 0; n < 200; n++) {
      ids.push(await lastValueFrom(client.emit(stream, { n })));
      if (n % 50 === 49) {
        // the fast group keeps up: reads and acks everything so far
        const read = await readGroup(stream, 'fast', 1000);
        if (read.length) await redis.xack(stream, 'fast', ...read);
      }
    }
    // the lagging group read 50 and acked only 20 of them
    const lagRead = await readGroup(stream, 'lagging', 50);
    await redis.xack(stream, 'lagging', ...lagRead.slice(0, 20));
    await client.trim(stream);

    // everything from the lagging group's oldest pending entry on is still there
    expect((await readAll(redis, stream)).map((e) => e.id)).toEqual(ids.slice(20));

    // the lagging group catches up: now the stream is trimmed to maxLen
    const rest = await readGroup(stream, 'lagging', 1000);
    await redis.xack(stream, 'lagging', ...lagRead.slice(20), ...rest);
    expect(await client.trim(stream)).toBe(170);
    expect((await readAll(redis, stream)).map((e) => e.id)).toEqual(ids.slice(190));
    await client.close();
  });

  it('a group that never read keeps the whole stream; without groups trimming works like MAXLEN', async () => {
    const kept = `${prefix}kept`;
    await redis.call('XGROUP', 'CREATE', kept, 'sleepy', '0', 'MKSTREAM');
    const plain = `${prefix}plain`;
    const client = new ClientRedisStreams({ connection: REDIS_URL, maxLen: 5, trimEvery: 1 });
    await client.connect();
    await Promise.all(
      Array.from({ length: 30 }, (_, n) => lastValueFrom(client.emit(kept, { n }))),
    );
    await Promise.all(
      Array.from({ length: 30 }, (_, n) => lastValueFrom(client.emit(plain, { n }))),
    );
    await client.trim(kept);
    await client.trim(plain);
    expect(await redis.xlen(kept)).toBe(30);
    expect(await redis.xlen(plain)).toBe(5);
    await client.close();
  });
});
