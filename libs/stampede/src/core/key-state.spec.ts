import { KeyStates, MAX_FAIL_SAFE_KEYS } from './key-state';

describe('KeyStates: one record per key', () => {
  it('concurrent callers of a slot share one run; the record goes once it settles', async () => {
    const keys = new KeyStates();
    let runs = 0;
    let release!: (v: string) => void;
    const fn = () => (runs++, new Promise<unknown>((r) => (release = r)));
    const first = keys.share('k', 'fallback', fn);
    const second = keys.share('k', 'fallback', fn);
    expect([first.joined, second.joined]).toEqual([false, true]);
    expect(second.promise).toBe(first.promise);
    expect(keys.size).toBe(1);
    release('v');
    expect(await second.promise).toBe('v');
    expect(runs).toBe(1);
    expect(keys.size).toBe(0);
  });

  it('every caller gets the same error, and a sync throw is a rejection', async () => {
    const keys = new KeyStates();
    const failing = keys.share('k', 'fallback', () => Promise.reject(new Error('boom')));
    const joined = keys.share('k', 'fallback', () => Promise.resolve('never'));
    await expect(failing.promise).rejects.toThrow('boom');
    await expect(joined.promise).rejects.toThrow('boom');
    const sync = keys.share('s', 'fallback', () => {
      throw new Error('sync');
    });
    await expect(sync.promise).rejects.toThrow('sync');
    expect(keys.size).toBe(0);
  });

  it('slots of one key run independently', async () => {
    const keys = new KeyStates();
    const a = keys.share('k', 'fallback', () => Promise.resolve('a'));
    const b = keys.share('k', 'read', () => Promise.resolve(undefined));
    expect(a.joined || b.joined).toBe(false);
    await Promise.all([a.promise, b.promise]);
  });

  it('forget: later callers start a new run, and the old run does not clear the new one', async () => {
    const keys = new KeyStates();
    let release!: () => void;
    const old = keys.share(
      'k',
      'read',
      () => new Promise<undefined>((r) => (release = () => r(undefined))),
    );
    keys.forget('k');
    let releaseNew!: () => void;
    const fresh = keys.share(
      'k',
      'read',
      () => new Promise<undefined>((r) => (releaseNew = () => r(undefined))),
    );
    expect(fresh.joined).toBe(false);
    release();
    await old.promise;
    expect(keys.share('k', 'read', () => Promise.resolve(undefined)).joined).toBe(true);
    releaseNew();
    await fresh.promise;
    expect(keys.size).toBe(0);
  });

  it('refreshing and backoff keep the record until cleared', () => {
    const keys = new KeyStates();
    expect(keys.startRefresh('k')).toBe(true);
    expect(keys.startRefresh('k')).toBe(false);
    expect(keys.isRefreshing('k')).toBe(true);
    keys.endRefresh('k');
    expect(keys.isRefreshing('k')).toBe(false);
    expect(keys.size).toBe(0);
    keys.backOff('k', 1000);
    expect(keys.backingOff('k', 999)).toBe(true);
    expect(keys.backingOff('k', 1000)).toBe(false);
    keys.backOff('k', undefined);
    expect(keys.size).toBe(0);
  });

  it('fail-safe: since the first failure, until grace ends; cleared by a fresh value or forget', () => {
    const keys = new KeyStates();
    expect(keys.failSafeState(0)).toBeUndefined();
    keys.noteFailSafe('a', 'A.m', 100, 1000);
    keys.noteFailSafe('a', 'A.m', 200, 1000);
    keys.noteFailSafe('b', 'B.m', 300, 2000);
    expect(keys.failSafeState(500)).toEqual({ keys: 2, methods: ['A.m', 'B.m'], since: 100 });
    expect(keys.failSafeState(1000)).toEqual({ keys: 1, methods: ['B.m'], since: 300 });
    keys.clearFailSafe('b');
    expect(keys.failSafeState(1000)).toBeUndefined();
    keys.noteFailSafe('c', 'C.m', 0, 5000);
    keys.forget('c');
    expect(keys.failSafeState(0)).toBeUndefined();
    expect(keys.size).toBe(0);
  });

  it('fail-safe keys are bounded: the oldest failure goes first', () => {
    const keys = new KeyStates();
    for (let i = 0; i <= MAX_FAIL_SAFE_KEYS; i++) keys.noteFailSafe(`k${i}`, 'm', i, 1e9);
    const state = keys.failSafeState(0)!;
    expect(state.keys).toBe(MAX_FAIL_SAFE_KEYS);
    expect(state.since).toBe(1);
  });

  it('backoffs are bounded: past 10,000 keys, the older ones are dropped', () => {
    const keys = new KeyStates();
    for (let i = 0; i <= 10_000; i++) keys.backOff(`k${i}`, 1e9);
    expect(keys.size).toBeLessThanOrEqual(10_000);
    expect(keys.backingOff('k10000', 0)).toBe(true);
  });
});
