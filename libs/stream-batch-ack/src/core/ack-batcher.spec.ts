import { AckBatcher } from './ack-batcher';
import { ManualClock } from '@nest-redis-resilience/common';
import { AckFlushError } from './errors';

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

function recorder(failTimes = 0) {
  const calls: { stream: string; ids: string[] }[] = [];
  let failures = failTimes;
  const fn = jest.fn(async (stream: string, ids: string[]) => {
    if (failures > 0) {
      failures--;
      throw new Error('NOPERM or connection lost');
    }
    calls.push({ stream, ids: [...ids] });
  });
  return { calls, fn, setFailures: (n: number) => (failures = n) };
}

describe('AckBatcher (fake clock)', () => {
  it('flushes by count: 1000 ids with batchSize 500 make exactly 2 flushes of 500, no timer needed', async () => {
    const clock = new ManualClock();
    const { calls, fn } = recorder();
    const batcher = new AckBatcher(fn, { batchSize: 500, intervalMs: 50, clock });
    for (let i = 0; i < 1000; i++) batcher.add('s', `${i}-0`);
    await settle();
    expect(calls.map((c) => c.ids.length)).toEqual([500, 500]);
    expect(calls.flatMap((c) => c.ids)).toEqual(Array.from({ length: 1000 }, (_, i) => `${i}-0`));
    expect(batcher.size).toBe(0);
    expect(clock.pendingTimers).toBe(0);
    await batcher.close();
  });

  it('flushes by time: 3 ids are sent together once intervalMs passed since the oldest', async () => {
    const clock = new ManualClock();
    const { calls, fn } = recorder();
    const batcher = new AckBatcher(fn, { batchSize: 500, intervalMs: 50, clock });
    batcher.add('s', '1-0');
    clock.advance(30);
    batcher.add('s', '2-0');
    batcher.add('s', '3-0');
    clock.advance(19);
    await settle();
    expect(calls).toEqual([]);
    clock.advance(1);
    await settle();
    expect(calls).toEqual([{ stream: 's', ids: ['1-0', '2-0', '3-0'] }]);
    expect(clock.pendingTimers).toBe(0);
    await batcher.close();
  });

  it('a timer flush sends only the ids queued when it started: ids arriving during its round trips wait for their own trigger', async () => {
    const clock = new ManualClock();
    const calls: string[][] = [];
    let release: () => void = () => undefined;
    // Each flush call stays "in flight" until released, as an XACK round trip does.
    const fn = (_stream: string, ids: string[]) =>
      new Promise<void>((resolve) => {
        calls.push([...ids]);
        release = resolve;
      });
    const batcher = new AckBatcher(fn, { batchSize: 500, intervalMs: 50, clock });
    batcher.add('s', '1-0');
    batcher.add('s', '2-0');
    clock.advance(50); // the timer flush starts with 2 ids
    expect(calls).toEqual([['1-0', '2-0']]);
    // A steady trickle: a few ids arrive during every round trip.
    for (let round = 0; round < 5; round++) {
      batcher.add('s', `${3 + round}-0`);
      clock.advance(1);
      release();
      await settle();
    }
    // Not one tiny XACK per round trip: the trickle waits for the interval (or the batch size).
    expect(calls.length).toBe(1);
    expect(batcher.size).toBe(5);
    clock.advance(50);
    await settle();
    expect(calls[1]).toEqual(['3-0', '4-0', '5-0', '6-0', '7-0']);
    release();
    await settle();
    expect(batcher.size).toBe(0);
    await batcher.close();
  });

  it('an id that arrives during a flush by count goes out by the interval after that flush ends', async () => {
    const clock = new ManualClock();
    const calls: string[][] = [];
    let release: () => void = () => undefined;
    const fn = (_stream: string, ids: string[]) =>
      new Promise<void>((resolve) => {
        calls.push([...ids]);
        release = resolve;
      });
    const batcher = new AckBatcher(fn, { batchSize: 2, intervalMs: 50, clock });
    batcher.add('s', '1-0');
    batcher.add('s', '2-0'); // the batch size: a flush starts
    batcher.add('s', '3-0'); // during its round trip
    clock.advance(100);
    await settle();
    expect(calls).toEqual([['1-0', '2-0']]);
    release();
    await settle();
    expect(batcher.size).toBe(1);
    clock.advance(49);
    await settle();
    expect(calls.length).toBe(1);
    clock.advance(1);
    await settle();
    expect(calls[1]).toEqual(['3-0']);
    release();
    await settle();
    expect(batcher.size).toBe(0);
    expect(clock.pendingTimers).toBe(0);
    await batcher.close();
  });

  it('at close, a long queue with batchSize 1 goes out in XACKs of up to 1000 ids, in order, each id once', async () => {
    const clock = new ManualClock();
    const { calls, fn } = recorder();
    const batcher = new AckBatcher(fn, { batchSize: 1, intervalMs: 0, clock });
    const ids = Array.from({ length: 3000 }, (_, i) => `${i}-0`);
    for (const id of ids) batcher.add('s', id);
    expect(await batcher.close()).toBe(0);
    expect(calls.every((c) => c.ids.length <= 1000)).toBe(true);
    expect(calls.length).toBeLessThanOrEqual(5);
    expect(calls.flatMap((c) => c.ids)).toEqual(ids);
  });

  it('keeps one queue per stream and flushes each with its own call', async () => {
    const clock = new ManualClock();
    const { calls, fn } = recorder();
    const batcher = new AckBatcher(fn, { batchSize: 2, intervalMs: 50, clock });
    batcher.add('a', '1-0');
    batcher.add('b', '1-0');
    batcher.add('a', '2-0');
    await settle();
    expect(calls).toEqual([{ stream: 'a', ids: ['1-0', '2-0'] }]);
    clock.advance(50);
    await settle();
    expect(calls[1]).toEqual({ stream: 'b', ids: ['1-0'] });
    await batcher.close();
  });

  it('ignores duplicate ids and reports queued ids with has()', async () => {
    const clock = new ManualClock();
    const { calls, fn } = recorder();
    const batcher = new AckBatcher(fn, { batchSize: 10, intervalMs: 50, clock });
    batcher.add('s', '1-0');
    batcher.add('s', '1-0');
    expect(batcher.size).toBe(1);
    expect(batcher.has('s', '1-0')).toBe(true);
    expect(batcher.has('s', '2-0')).toBe(false);
    clock.advance(50);
    await settle();
    expect(calls).toEqual([{ stream: 's', ids: ['1-0'] }]);
    expect(batcher.has('s', '1-0')).toBe(false);
    await batcher.close();
  });

  it('keeps the ids of a failed flush, in order, and retries them with backoff until it succeeds', async () => {
    const clock = new ManualClock();
    const { calls, fn } = recorder(3);
    const errors: AckFlushError[] = [];
    const batcher = new AckBatcher(fn, {
      batchSize: 4,
      intervalMs: 50,
      clock,
      random: () => 0.5, // no jitter
      backoff: { initialMs: 100, factor: 2, maxMs: 1000 },
      onError: (e) => errors.push(e),
    });
    for (let i = 1; i <= 4; i++) batcher.add('s', `${i}-0`);
    await settle();
    expect(errors).toHaveLength(1);
    expect(errors[0].code).toBe('ACK_FLUSH_FAILED');
    expect(batcher.size).toBe(4);
    // more ids arrive while failing: they queue behind, nothing is sent before the backoff ends
    for (let i = 5; i <= 9; i++) batcher.add('s', `${i}-0`);
    await settle();
    expect(fn).toHaveBeenCalledTimes(1);
    clock.advance(100); // retry 1 fails, next in 200
    await settle();
    expect(errors).toHaveLength(2);
    clock.advance(200); // retry 2 fails, next in 400
    await settle();
    expect(errors).toHaveLength(3);
    expect(batcher.size).toBe(9);
    clock.advance(399);
    await settle();
    expect(fn).toHaveBeenCalledTimes(3);
    clock.advance(1); // retry 3 succeeds and drains everything in chunks of batchSize
    await settle();
    expect(calls.map((c) => c.ids)).toEqual([
      ['1-0', '2-0', '3-0', '4-0'],
      ['5-0', '6-0', '7-0', '8-0'],
      ['9-0'],
    ]);
    expect(batcher.size).toBe(0);
    await batcher.close();
  });

  it('close() flushes everything that is queued, whatever its size or age', async () => {
    const clock = new ManualClock();
    const { calls, fn } = recorder();
    const batcher = new AckBatcher(fn, { batchSize: 500, intervalMs: 10_000, clock });
    batcher.add('a', '1-0');
    batcher.add('b', '2-0');
    await expect(batcher.close()).resolves.toBe(0);
    expect(calls).toEqual([
      { stream: 'a', ids: ['1-0'] },
      { stream: 'b', ids: ['2-0'] },
    ]);
    expect(batcher.isClosed).toBe(true);
    expect(batcher.add('a', '3-0')).toBe(false);
    expect(clock.pendingTimers).toBe(0);
  });

  it('close() retries failed flushes until they pass', async () => {
    const clock = new ManualClock();
    const { calls, fn } = recorder(2);
    const batcher = new AckBatcher(fn, {
      batchSize: 500,
      intervalMs: 50,
      clock,
      random: () => 0.5,
      backoff: { initialMs: 10 },
    });
    batcher.add('s', '1-0');
    const closed = batcher.close(5000);
    for (let i = 0; i < 20 && calls.length === 0; i++) {
      await settle();
      clock.advance(10);
    }
    await expect(closed).resolves.toBe(0);
    expect(calls).toEqual([{ stream: 's', ids: ['1-0'] }]);
  });

  it('close() gives up after its timeout without dropping ids, and reports how many are left', async () => {
    const clock = new ManualClock();
    const { fn } = recorder(Number.MAX_SAFE_INTEGER);
    const batcher = new AckBatcher(fn, {
      batchSize: 500,
      intervalMs: 50,
      clock,
      random: () => 0.5,
      backoff: { initialMs: 10 },
    });
    batcher.add('s', '1-0');
    batcher.add('s', '2-0');
    const closed = batcher.close(1000);
    let done = false;
    void closed.then(() => (done = true));
    for (let i = 0; i < 200 && !done; i++) {
      await settle();
      clock.advance(20);
    }
    await expect(closed).resolves.toBe(2);
    expect(batcher.has('s', '1-0') && batcher.has('s', '2-0')).toBe(true);
  });

  it('notifies listeners after a flush (used to resume reading)', async () => {
    const clock = new ManualClock();
    const { fn } = recorder();
    const batcher = new AckBatcher(fn, { batchSize: 2, intervalMs: 50, clock });
    const seen: number[] = [];
    batcher.onChange(() => seen.push(batcher.size));
    batcher.add('s', '1-0');
    batcher.add('s', '2-0');
    await settle();
    expect(seen).toEqual([0]);
    await batcher.close();
  });
});
