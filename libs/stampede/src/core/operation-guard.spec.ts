import { ManualClock } from './clock';
import { StoreUnavailableError } from './errors';
import { OperationGuard } from './operation-guard';

describe('OperationGuard: timeouts and cool-down of store operations', () => {
  function guard() {
    const clock = new ManualClock();
    const g = new OperationGuard({ timeoutMs: 500, cooldownMs: 1000, clock, backend: 'Redis' });
    return { clock, g };
  }
  const pending = <T>() => {
    let resolve!: (v: T) => void;
    const promise = new Promise<T>((r) => (resolve = r));
    return { promise, resolve };
  };

  it('an answer within the timeout passes through; an error too', async () => {
    const { g, clock } = guard();
    await expect(g.bound(Promise.resolve('OK'), 'command')).resolves.toBe('OK');
    await expect(g.bound(Promise.reject(new Error('WRONGTYPE')), 'command')).rejects.toThrow(
      'WRONGTYPE',
    );
    // One timer for all operations: once it finds nothing in flight, it is not set again.
    clock.advance(500);
    expect(clock.pendingTimers).toBe(0);
  });

  it('operations that answer keep one timer, however many there are', async () => {
    const { g, clock } = guard();
    const ops = Array.from({ length: 100 }, (_, i) => g.bound(Promise.resolve(i), 'command'));
    expect(clock.pendingTimers).toBe(1);
    expect(await Promise.all(ops)).toHaveLength(100);
    clock.advance(500);
    expect(clock.pendingTimers).toBe(0);
  });

  it('past the timeout: a StoreUnavailableError that may still apply; the late reply is handed over', async () => {
    const { g, clock } = guard();
    const op = pending<string>();
    const late: string[] = [];
    const bounded = g.bound(op.promise, 'command', (reply) => late.push(reply));
    clock.advance(500);
    const err = await bounded.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect((err as StoreUnavailableError).maybeApplied).toBe(true);
    expect((err as Error).message).toBe('Redis command took longer than 500 ms');
    op.resolve('OK');
    await op.promise;
    await Promise.resolve();
    expect(late).toEqual(['OK']);
  });

  it('a stalling timeout starts the cool-down and gives up the other operations in flight', async () => {
    const { g, clock } = guard();
    const first = g.bound(pending<string>().promise, 'command', undefined, true);
    clock.advance(100);
    const second = g.bound(pending<string>().promise, 'command', undefined, true);
    clock.advance(400);
    await expect(first).rejects.toThrow('took longer than 500 ms');
    await expect(second).rejects.toThrow('Redis stalled: a call before this one timed out');
    expect(() => g.check()).toThrow('Redis timed out recently; skipping it for a moment');
    expect(g.cooldownRemainingMs()).toBe(1000);
    clock.advance(1000);
    expect(() => g.check()).not.toThrow();
    expect(g.cooldownRemainingMs()).toBe(0);
  });

  it('a timeout that does not stall others (a health PING) starts no cool-down', async () => {
    const { g, clock } = guard();
    const ping = g.bound(pending<string>().promise, 'PING');
    clock.advance(500);
    await expect(ping).rejects.toThrow('Redis PING took longer than 500 ms');
    expect(g.cooldownRemainingMs()).toBe(0);
  });
});
