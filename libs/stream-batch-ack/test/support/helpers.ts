import { INestMicroservice, ModuleMetadata } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import {
  RedisStreamsServerOptions,
  ServerRedisStreams,
} from '@nest-redis-resilience/stream-batch-ack';

export { REDIS_URL, deleteKeys } from '../../../../test/support/redis';
export { sleep, waitFor } from '../../../../test/support/wait';

/** A key prefix of its own for each test file (and test). */
export function randomPrefix(name: string): string {
  return `sba-test:${name}:${randomBytes(4).toString('hex')}:`;
}

export async function xackCalls(redis: Redis): Promise<number> {
  const info = await redis.info('commandstats');
  const m = /cmdstat_xack:calls=(\d+)/.exec(info);
  return m ? Number(m[1]) : 0;
}

export async function pendingCount(redis: Redis, stream: string, group: string): Promise<number> {
  const summary = (await redis.call('XPENDING', stream, group)) as [number, ...unknown[]];
  return Number(summary[0]);
}

export async function pendingIds(redis: Redis, stream: string, group: string): Promise<string[]> {
  const rows = (await redis.call('XPENDING', stream, group, '-', '+', 100_000)) as [
    string,
    string,
    number,
    number,
  ][];
  return rows.map((r) => r[0]);
}

export async function readAll(
  redis: Redis,
  stream: string,
): Promise<{ id: string; fields: Record<string, string> }[]> {
  const rows = (await redis.call('XRANGE', stream, '-', '+')) as [string, string[]][];
  return rows.map(([id, flat]) => {
    const fields: Record<string, string> = {};
    for (let i = 0; i < flat.length; i += 2) fields[flat[i]] = flat[i + 1];
    return { id, fields };
  });
}

/**
 * Appends `n` entries in the client's format, in one transaction; returns their ids in order. A
 * reader blocked on the stream gets them in one read (a pipeline could wake it after the first
 * XADD, and a batch handler would see them split).
 */
export async function produce(
  redis: Redis,
  stream: string,
  payloads: unknown[],
): Promise<string[]> {
  const transaction = redis.multi();
  for (const p of payloads) transaction.xadd(stream, '*', 'data', JSON.stringify(p));
  const res = (await transaction.exec()) ?? [];
  return res.map(([err, id]) => {
    if (err) throw err;
    return id as string;
  });
}

/** Starts a Nest microservice on ServerRedisStreams with the given controllers/providers. */
export async function startMicroservice(
  metadata: ModuleMetadata,
  options: RedisStreamsServerOptions,
): Promise<{ app: INestMicroservice; server: ServerRedisStreams }> {
  const moduleRef = await Test.createTestingModule(metadata).compile();
  const server = new ServerRedisStreams(options);
  const app = moduleRef.createNestMicroservice({ strategy: server, logger: false });
  await app.listen();
  return { app, server };
}
