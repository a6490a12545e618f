import { SingleFlight } from './single-flight';

function deferred<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

describe('SingleFlight', () => {
  it('shares one execution among concurrent callers of a key', async () => {
    const flight = new SingleFlight<number>();
    const d = deferred<number>();
    let runs = 0;
    const calls = Array.from({ length: 10 }, () => flight.run('k', () => (runs++, d.promise)));
    expect(calls.map((c) => c.joined)).toEqual([false, ...Array(9).fill(true)]);
    d.resolve(7);
    expect(await Promise.all(calls.map((c) => c.promise))).toEqual(Array(10).fill(7));
    expect(runs).toBe(1);
    expect(flight.size).toBe(0);
  });

  it('gives every joined caller the same error, then starts afresh', async () => {
    const flight = new SingleFlight<number>();
    const err = new Error('boom');
    const d = deferred<number>();
    const calls = Array.from({ length: 5 }, () => flight.run('k', () => d.promise));
    d.reject(err);
    const results = await Promise.allSettled(calls.map((c) => c.promise));
    expect(results.every((r) => r.status === 'rejected' && r.reason === err)).toBe(true);
    const next = flight.run('k', async () => 1);
    expect(next.joined).toBe(false);
    expect(await next.promise).toBe(1);
  });

  it('turns a synchronous throw into a rejection shared by joiners', async () => {
    const flight = new SingleFlight<number>();
    const first = flight.run('k', () => {
      throw new Error('sync');
    });
    await expect(first.promise).rejects.toThrow('sync');
  });

  it('forget(key): later callers start a new execution; the old one still completes for its callers', async () => {
    const flight = new SingleFlight<string>();
    const old = deferred<string>();
    const fresh = deferred<string>();
    const a = flight.run('k', () => old.promise);
    flight.forget('k');
    const b = flight.run('k', () => fresh.promise);
    const c = flight.run('k', () => Promise.resolve('unused'));
    expect(b.joined).toBe(false);
    expect(c.joined).toBe(true);
    old.resolve('old');
    expect(await a.promise).toBe('old');
    // the old call finishing must not evict the new one
    expect(flight.has('k')).toBe(true);
    fresh.resolve('new');
    expect(await c.promise).toBe('new');
    expect(flight.has('k')).toBe(false);
  });

  it('keeps keys independent', async () => {
    const flight = new SingleFlight<string>();
    const a = flight.run('a', async () => 'A');
    const b = flight.run('b', async () => 'B');
    expect([a.joined, b.joined]).toEqual([false, false]);
    expect(await Promise.all([a.promise, b.promise])).toEqual(['A', 'B']);
  });
});
