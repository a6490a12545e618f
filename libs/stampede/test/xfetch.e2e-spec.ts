import { Injectable } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  Cacheable,
  DistLock,
  SingleFlight,
  StampedeModule,
  StampedeService,
  XFetch,
} from '@nest-redis-resilience/stampede';
import { REDIS_URL, delay, deleteKeys, uniquePrefix } from './support/redis';

// A load of 100 ms with beta 4 draws leads of about 0.9 s (under 0.3 s in fewer than 1 % of
// windows): the margin that an event-loop stall of the busy test machine must not exceed for a
// caller to wait.
const TTL = 4000;
const LOAD_MS = 100;

/** Counts loads across both app instances of the test. */
const backend = { loads: 0, running: 0, maxRunning: 0 };

@Injectable()
class QuoteService {
  @Cacheable({ key: () => 'quote', ttl: TTL })
  @SingleFlight()
  @XFetch(4)
  @DistLock({ ttl: 2000, poll: 5 })
  async quote(): Promise<number> {
    backend.loads++;
    backend.running++;
    backend.maxRunning = Math.max(backend.maxRunning, backend.running);
    await delay(LOAD_MS);
    backend.running--;
    return backend.loads;
  }
}

describe('XFetch under steady traffic (two app instances, real Redis)', () => {
  jest.setTimeout(30_000);
  const prefix = uniquePrefix('xfetch');
  let apps: TestingModule[];
  let redis: Redis;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    apps = await Promise.all(
      [1, 2].map(async () => {
        const m = await Test.createTestingModule({
          imports: [StampedeModule.forRoot({ redis: REDIS_URL, keyPrefix: prefix })],
          providers: [QuoteService],
        }).compile();
        return m.init();
      }),
    );
  });

  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('callers never wait for the loader after warm-up, and about one early recomputation happens per TTL window', async () => {
    const services = apps.map((a) => a.get(QuoteService));
    await services[0].quote(); // warm-up: the only call that waits
    const started = Date.now();
    const DURATION = 8000;
    let calls = 0;
    while (Date.now() - started < DURATION) {
      await Promise.all(services.map((s) => s.quote()));
      calls += 2;
      await delay(4);
    }
    const elapsed = Date.now() - started;
    await delay(LOAD_MS * 2); // let a last background recomputation finish

    const metrics = apps.map((a) => a.get(StampedeService).metrics()['QuoteService.quote']);
    const sum = (k: 'misses' | 'earlyRecomputes' | 'hits' | 'staleServes') =>
      metrics.reduce((n, m) => n + m[k], 0);
    // Only the warm-up call missed: nobody else waited for the loader.
    expect(sum('misses')).toBe(1);
    expect(sum('hits')).toBe(calls);
    // Recomputations were coalesced across both instances: never two loads at once,
    // and close to one per TTL window.
    const windows = elapsed / TTL;
    expect(backend.maxRunning).toBe(1);
    expect(sum('earlyRecomputes')).toBe(backend.loads - 1);
    expect(sum('earlyRecomputes')).toBeGreaterThanOrEqual(Math.floor(windows * 0.8));
    expect(sum('earlyRecomputes')).toBeLessThanOrEqual(Math.ceil(windows * 1.6));
  });
});
