import { Injectable } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  Cacheable,
  DistLock,
  StampedeModule,
  StampedeService,
} from '@nest-redis-resilience/stampede';
import { REDIS_URL, deleteKeys, uniquePrefix } from './support/redis';
import { waitFor } from '../../../test/support/wait';

/** A loader that can be held: while the gate is closed, loads wait (a slow database). */
class Gate {
  private opened!: () => void;
  private promise = Promise.resolve();
  close(): void {
    this.promise = new Promise((resolve) => (this.opened = resolve));
  }
  open(): void {
    this.opened?.();
  }
  pass(): Promise<void> {
    return this.promise;
  }
}

const gate = new Gate();
const loads = new Map<string, number>();
const load = async (key: string): Promise<string> => {
  const n = (loads.get(key) ?? 0) + 1;
  loads.set(key, n);
  await gate.pass();
  return `${key}#${n}`;
};

@Injectable()
class PriceService {
  @Cacheable({
    key: (id: string) => `graced:${id}`,
    ttl: 60_000,
    grace: 60_000,
    tags: (id: string) => [`shop:${id}`],
  })
  @DistLock({ ttl: 5000 })
  async graced(id: string): Promise<string> {
    return load(`graced:${id}`);
  }

  @Cacheable({
    key: (id: string) => `plain:${id}`,
    ttl: 60_000,
    tags: (id: string) => [`shop:${id}`],
  })
  @DistLock({ ttl: 5000 })
  async plain(id: string): Promise<string> {
    return load(`plain:${id}`);
  }
}

/**
 * expire(key) and invalidateTags(tags, { mode: 'soft' }): values turn stale without being
 * dropped. With grace, callers on both instances get the old value at once while one refresh
 * runs across instances; without grace, the next caller loads, as after a hard invalidation.
 */
describe('soft expiry (two instances, real Redis)', () => {
  jest.setTimeout(60_000);
  const prefix = uniquePrefix('soft');
  let redis: Redis;
  const apps: TestingModule[] = [];

  const start = async () => {
    const app = await Test.createTestingModule({
      imports: [StampedeModule.forRoot({ redis: REDIS_URL, keyPrefix: prefix, l1: true })],
      providers: [PriceService],
    }).compile();
    apps.push(await app.init());
    return { stampede: app.get(StampedeService), prices: app.get(PriceService) };
  };
  let a: Awaited<ReturnType<typeof start>>;
  let b: Awaited<ReturnType<typeof start>>;

  /** 50 callers on each instance: all answered while the gate is closed (no one waits for a load). */
  const crowd = (call: (s: typeof a) => Promise<string>) =>
    Promise.all([a, b].flatMap((s) => Array.from({ length: 50 }, () => call(s))));

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    a = await start();
    b = await start();
  });

  afterEach(() => gate.open());

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('expire with grace: both instances serve the old value at once while one refresh runs', async () => {
    expect(await a.prices.graced('1')).toBe('graced:1#1');
    expect(await b.prices.graced('1')).toBe('graced:1#1'); // in both L1s
    gate.close();
    await b.stampede.expire('graced:1');
    expect(await redis.exists(`${prefix}{graced:1}`)).toBe(1); // not dropped
    await waitFor('A drops its L1 copy', async () => {
      const served = await crowd((s) => s.prices.graced('1'));
      return served.every((v) => v === 'graced:1#1') && (loads.get('graced:1') ?? 0) >= 2;
    });
    expect(loads.get('graced:1')).toBe(2); // one refresh, across both instances
    gate.open();
    await waitFor('the refreshed value is served on both', async () => {
      const served = await crowd((s) => s.prices.graced('1'));
      return served.every((v) => v === 'graced:1#2');
    });
    expect(loads.get('graced:1')).toBe(2);
  });

  it('expire without grace is a hard invalidation: the next caller loads', async () => {
    expect(await a.prices.plain('2')).toBe('plain:2#1');
    expect(await b.prices.plain('2')).toBe('plain:2#1');
    await a.stampede.expire('plain:2');
    expect(await redis.exists(`${prefix}{plain:2}`)).toBe(0);
    await waitFor(
      'B drops its L1 copy',
      async () => (await b.stampede.get('plain:2')) === undefined,
    );
    const served = await crowd((s) => s.prices.plain('2'));
    expect(served.every((v) => v === 'plain:2#2')).toBe(true); // one load, all wait for it
    expect(loads.get('plain:2')).toBe(2);
  });

  it('a soft tag invalidation serves the old values at once while one refresh per key runs', async () => {
    expect(await a.prices.graced('3')).toBe('graced:3#1');
    expect(await b.prices.graced('3')).toBe('graced:3#1');
    gate.close();
    await a.stampede.invalidateTags(['shop:3'], { mode: 'soft' });
    await waitFor('B learns the soft invalidation and starts the refresh', async () => {
      const served = await crowd((s) => s.prices.graced('3'));
      return served.every((v) => v === 'graced:3#1') && (loads.get('graced:3') ?? 0) >= 2;
    });
    expect(loads.get('graced:3')).toBe(2);
    gate.open();
    await waitFor('the refreshed value is served on both', async () =>
      (await crowd((s) => s.prices.graced('3'))).every((v) => v === 'graced:3#2'),
    );
    expect(loads.get('graced:3')).toBe(2);
  });

  it('a soft tag invalidation without grace is a hard one: the next caller loads', async () => {
    expect(await a.prices.plain('4')).toBe('plain:4#1');
    expect(await b.prices.plain('4')).toBe('plain:4#1');
    await b.stampede.invalidateTags(['shop:4'], { mode: 'soft' });
    await waitFor('A learns it', async () => (await a.prices.plain('4')) === 'plain:4#2');
    expect(await b.prices.plain('4')).toBe('plain:4#2');
    expect(loads.get('plain:4')).toBe(2);
  });

  it('a hard invalidation after a soft one drops the stale values', async () => {
    expect(await a.prices.graced('5')).toBe('graced:5#1');
    gate.close();
    await a.stampede.invalidateTags(['shop:5'], { mode: 'soft' });
    await a.stampede.invalidateTags(['shop:5']);
    const fresh = b.prices.graced('5'); // a miss: waits for the load
    await waitFor('the load starts', () => (loads.get('graced:5') ?? 0) >= 2);
    gate.open();
    // Never the old value; B may load once more if it stamped its load before the hard
    // invalidation's broadcast reached it (the value is then taken for an old one).
    expect(await fresh).not.toBe('graced:5#1');
    expect(await a.prices.graced('5')).not.toBe('graced:5#1');
  });

  it('an instance started after a soft invalidation reads the hard floor from Redis and serves stale too', async () => {
    expect(await a.prices.graced('6')).toBe('graced:6#1');
    gate.close();
    await a.stampede.invalidateTags(['shop:6'], { mode: 'soft' });
    expect(await redis.get(`${prefix}__tag:{shop:6}`)).toMatch(/^\d+:\d+$/);
    const c = await start();
    // Stale, at once; the refresh starts on this call or a later one (a try-lock declines while
    // the mark of the last fill, at most 1 s, is still in the lock).
    await waitFor('one refresh starts', async () => {
      expect(await c.prices.graced('6')).toBe('graced:6#1');
      return (loads.get('graced:6') ?? 0) >= 2;
    });
    gate.open();
    await waitFor('refreshed', async () => (await c.prices.graced('6')) === 'graced:6#2');
    expect(loads.get('graced:6')).toBe(2);
  });

  it('expire of a key set with grace keeps it stale for getOrLoad callers; get sees no fresh value', async () => {
    await a.stampede.set('set:7', 'old', { grace: '1m' });
    await a.stampede.expire('set:7');
    expect(await b.stampede.get('set:7')).toBeUndefined();
    const loader = jest.fn(async () => 'new');
    expect(await b.stampede.getOrLoad('set:7', loader)).toBe('old'); // grace of the value itself
    await waitFor('refreshed', async () => (await b.stampede.get('set:7')) === 'new');
    expect(loader).toHaveBeenCalledTimes(1);
  });

  it('expire of a missing key, and invalidateTags with a bad mode', async () => {
    await expect(a.stampede.expire('missing')).resolves.toBeUndefined();
    await expect(
      a.stampede.invalidateTags(['x'], { mode: 'later' as unknown as 'soft' }),
    ).rejects.toThrow(/mode/);
  });
});
