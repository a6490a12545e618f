import type { Logger } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { FlowGate } from '../core/flow-gate';
import { RawEntry, StreamReader } from './stream-reader';

/**
 * A blocking connection that answers `XREADGROUP GROUP g c COUNT n BLOCK ms STREAMS s... >...`
 * as Redis does: up to COUNT new entries per stream, only the streams that have some, each entry
 * once; with none, it blocks until an entry arrives or BLOCK ms pass (then a nil reply).
 */
class FakeStreams {
  private readonly unread = new Map<string, RawEntry[]>();
  private readonly blocked = new Set<() => void>();
  private readonly errors: Error[] = [];
  private closed = false;
  private seq = 0;

  add(stream: string, count = 1): void {
    const entries = this.unread.get(stream) ?? [];
    for (let i = 0; i < count; i++) entries.push([`${++this.seq}-0`, ['data', String(this.seq)]]);
    this.unread.set(stream, entries);
    for (const wake of [...this.blocked]) wake();
  }

  /** The next reads fail with these errors, one each. */
  failNext(...messages: string[]): void {
    this.errors.push(...messages.map((m) => new Error(m)));
  }

  disconnect(): void {
    this.closed = true;
    for (const wake of [...this.blocked]) wake();
  }

  async call(command: string, ...args: (string | number)[]): Promise<unknown> {
    expect(command).toBe('XREADGROUP');
    const count = Number(args[args.indexOf('COUNT') + 1]);
    const blockMs = Number(args[args.indexOf('BLOCK') + 1]);
    const keys = args.slice(args.indexOf('STREAMS') + 1);
    const streams = keys.slice(0, keys.length / 2).map(String);
    const deadline = Date.now() + blockMs;
    for (;;) {
      if (this.closed) throw new Error('Connection is closed.');
      const error = this.errors.shift();
      if (error) throw error;
      const reply: [string, RawEntry[]][] = [];
      for (const stream of streams) {
        const entries = this.unread.get(stream) ?? [];
        if (entries.length > 0) reply.push([stream, entries.splice(0, count)]);
      }
      if (reply.length > 0) return reply;
      const left = deadline - Date.now();
      if (left <= 0) return null;
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          this.blocked.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, left);
        this.blocked.add(wake);
      });
    }
  }
}

async function until(condition: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function setup(
  streams: string[],
  opts: { count?: number; blockMs?: number; concurrency?: number; takeOnDeliver?: boolean } = {},
) {
  const redis = new FakeStreams();
  const gate = new FlowGate({ concurrency: opts.concurrency ?? 100, maxPending: 1000 }, () => 0);
  const delivered: { stream: string; ids: string[] }[] = [];
  const errors: string[] = [];
  const logger = { error: (message: string) => errors.push(message) } as unknown as Logger;
  let recreations = 0;
  let recreate: () => Promise<void> = async () => {
    recreations++;
  };
  const reader = new StreamReader(
    redis as unknown as Redis,
    streams,
    { group: 'g', consumer: 'c', count: opts.count ?? 10, blockMs: opts.blockMs ?? 20 },
    gate,
    (stream, entries) => {
      // As the server does: each entry handed on holds room until its handler is done.
      if (opts.takeOnDeliver) gate.take(entries.length);
      delivered.push({ stream, ids: entries.map(([id]) => id) });
    },
    () => recreate(),
    logger,
  );
  const running = reader.run();
  const ids = () => delivered.flatMap((d) => d.ids);
  const stop = async () => {
    gate.close();
    reader.stop();
    await running;
  };
  return {
    redis,
    gate,
    delivered,
    ids,
    errors,
    recreations: () => recreations,
    onRecreate: (fn: () => Promise<void>) => (recreate = fn),
    stop,
  };
}

describe('StreamReader', () => {
  it('hands on the new entries of each stream, per stream, each once, in order', async () => {
    const t = setup(['a', 'b']);
    t.redis.add('a', 2);
    t.redis.add('b', 1);
    await until(() => t.ids().length === 3);
    // Entries that arrive while a read blocks (and after nil replies) come next.
    await sleep(50);
    t.redis.add('b', 2);
    await until(() => t.ids().length === 5);
    await t.stop();
    expect(t.delivered.filter((d) => d.stream === 'a').flatMap((d) => d.ids)).toEqual([
      '1-0',
      '2-0',
    ]);
    expect(t.delivered.filter((d) => d.stream === 'b').flatMap((d) => d.ids)).toEqual([
      '3-0',
      '4-0',
      '5-0',
    ]);
    expect(t.delivered.every((d) => d.ids.length > 0)).toBe(true);
    expect(t.errors).toEqual([]);
  });

  it('reads no more than the gate has room for, and nothing while it is full', async () => {
    const t = setup(['s'], { count: 100, concurrency: 3, takeOnDeliver: true });
    t.redis.add('s', 10);
    await until(() => t.ids().length === 3);
    await sleep(150);
    expect(t.ids()).toHaveLength(3);
    // Two handlers finish: room for two more.
    t.gate.release(2);
    await until(() => t.ids().length === 5);
    await sleep(150);
    expect(t.ids()).toHaveLength(5);
    await t.stop();
    expect(t.ids()).toEqual(['1-0', '2-0', '3-0', '4-0', '5-0']);
  });

  it('over several streams, one read takes no more than the room in all (COUNT applies per stream)', async () => {
    const t = setup(['a', 'b', 'c'], { count: 100, concurrency: 7, takeOnDeliver: true });
    t.redis.add('a', 10);
    t.redis.add('b', 10);
    t.redis.add('c', 10);
    try {
      await until(() => t.ids().length > 0);
      await sleep(150);
      expect(t.gate.inFlight).toBeLessThanOrEqual(7);
      // Room frees a few times: every read stays within it, and each stream gets entries.
      for (let round = 0; round < 3; round++) {
        t.gate.release(t.gate.inFlight);
        await until(() => t.gate.inFlight > 0);
        await sleep(50);
        expect(t.gate.inFlight).toBeLessThanOrEqual(7);
      }
    } finally {
      await t.stop();
    }
    expect(new Set(t.delivered.map((d) => d.stream))).toEqual(new Set(['a', 'b', 'c']));
    expect(new Set(t.ids()).size).toBe(t.ids().length);
  });

  it('with one free slot and three streams, each stream is read in turn', async () => {
    const t = setup(['a', 'b', 'c'], { count: 100, concurrency: 1, takeOnDeliver: true });
    t.redis.add('a', 5);
    t.redis.add('b', 5);
    t.redis.add('c', 5);
    try {
      for (let n = 1; n <= 6; n++) {
        await until(() => t.ids().length === n);
        await sleep(20);
        expect(t.ids()).toHaveLength(n);
        t.gate.release(1);
      }
    } finally {
      await t.stop();
    }
    expect(t.delivered.slice(0, 6).map((d) => d.stream)).toEqual(['a', 'b', 'c', 'a', 'b', 'c']);
  });

  it('reads at most `count` entries of a stream at a time', async () => {
    const t = setup(['s'], { count: 4 });
    t.redis.add('s', 10);
    await until(() => t.ids().length === 10);
    await t.stop();
    expect(t.delivered.map((d) => d.ids.length)).toEqual([4, 4, 2]);
  });

  it('after NOGROUP, creates the groups again and reads on', async () => {
    const t = setup(['s']);
    t.redis.failNext('NOGROUP No such key or consumer group');
    t.redis.add('s', 2);
    await until(() => t.ids().length === 2);
    await t.stop();
    expect(t.recreations()).toBe(1);
    expect(t.errors).toEqual([]);
  });

  it('a group that cannot be created again is logged, and reading is tried again', async () => {
    const t = setup(['s']);
    t.onRecreate(async () => {
      throw new Error('READONLY You cannot write against a read only replica.');
    });
    t.redis.failNext('NOGROUP No such key or consumer group');
    t.redis.add('s', 1);
    await until(() => t.ids().length === 1);
    await t.stop();
    expect(t.errors).toHaveLength(1);
    expect(t.errors[0]).toContain('"g" is missing and could not be created again');
    expect(t.errors[0]).toContain('READONLY');
  });

  it('another read error is logged and retried after a backoff; reading goes on', async () => {
    const t = setup(['s']);
    t.redis.failNext('LOADING Redis is loading the dataset in memory');
    t.redis.add('s', 3);
    const started = Date.now();
    await until(() => t.ids().length === 3);
    const elapsed = Date.now() - started;
    await t.stop();
    expect(t.errors).toEqual(['XREADGROUP failed: LOADING Redis is loading the dataset in memory']);
    expect(t.recreations()).toBe(0);
    // The first retry waits about 100 ms (+-20 % jitter).
    expect(elapsed).toBeGreaterThanOrEqual(75);
  });

  it('closing the gate and stopping ends run(), even while a read blocks, without an error', async () => {
    const t = setup(['s'], { blockMs: 60_000 });
    await sleep(20);
    await t.stop();
    expect(t.errors).toEqual([]);
    t.redis.add('s', 1);
    await sleep(20);
    expect(t.ids()).toEqual([]);
  });
});
