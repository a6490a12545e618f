import { Injectable } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  Cacheable,
  currentLoadSignal,
  DistLock,
  SingleFlight,
  StampedeConfigError,
  StampedeModule,
  StampedeService,
  StampedeTimeoutError,
} from '@nest-redis-resilience/stampede';
import { REDIS_URL, delay, deleteKeys, uniquePrefix } from './support/redis';
import { waitFor } from '../../../test/support/wait';

const TTL = 300;
const GRACE = 1500;

/** Loads across the instances of a test; the value says which load made it. */
const backend = { loads: 0, failing: false, delayMs: 0, aborted: 0 };

@Injectable()
class QuoteService {
  @Cacheable({ key: (s: string) => `quote:${s}`, ttl: TTL, grace: GRACE, graceBackoff: 100 })
  @SingleFlight()
  @DistLock({ ttl: 5000, poll: 5 })
  async quote(symbol: string): Promise<{ symbol: string; load: number }> {
    return load(symbol);
  }

  @Cacheable({
    key: (s: string) => `soft:${s}`,
    ttl: TTL,
    grace: GRACE,
    timeout: { soft: 50, hard: 2000 },
  })
  async soft(symbol: string): Promise<{ symbol: string; load: number }> {
    return load(symbol);
  }

  @Cacheable({ key: (s: string) => `hard:${s}`, ttl: 60_000, timeout: { hard: 100 } })
  @SingleFlight()
  async hard(symbol: string): Promise<{ symbol: string; load: number }> {
    return load(symbol);
  }
}

async function load(symbol: string): Promise<{ symbol: string; load: number }> {
  const n = ++backend.loads;
  const signal = currentLoadSignal();
  if (backend.delayMs) await delay(backend.delayMs);
  if (signal?.aborted) backend.aborted++;
  if (backend.failing) throw new Error('backend down');
  return { symbol, load: n };
}

describe('grace and loader timeouts (3 instances, real Redis)', () => {
  jest.setTimeout(60_000);
  const prefix = uniquePrefix('grace');
  let redis: Redis;
  const apps: TestingModule[] = [];
  let quotes: QuoteService[];

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    for (let i = 0; i < 3; i++) {
      const app = await Test.createTestingModule({
        imports: [
          StampedeModule.forRoot({ redis: REDIS_URL, keyPrefix: prefix, operationTimeout: 5000 }),
        ],
        providers: [QuoteService],
      }).compile();
      apps.push(await app.init());
    }
    quotes = apps.map((app) => app.get(QuoteService));
  });

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  beforeEach(() => Object.assign(backend, { loads: 0, failing: false, delayMs: 0, aborted: 0 }));

  const metric = (name: 'staleServes' | 'failSafes' | 'timeouts', method: string) =>
    apps.reduce(
      (n, app) => n + (app.get(StampedeService).metrics()[`QuoteService.${method}`]?.[name] ?? 0),
      0,
    );

  it('after the TTL, the stale value is served at once and one refresh runs across 3 instances', async () => {
    const first = await quotes[0].quote('AAA');
    expect(await redis.pttl(`${prefix}{quote:AAA}`)).toBeGreaterThan(TTL); // kept ttl + grace
    await delay(TTL + 50);
    backend.delayMs = 600; // the refresh takes a while: callers must not wait for it
    const started = Date.now();
    const stale = await Promise.all(
      quotes.flatMap((q) => Array.from({ length: 20 }, () => q.quote('AAA'))),
    );
    expect(Date.now() - started).toBeLessThan(450);
    expect(stale.every((v) => v.load === first.load)).toBe(true);
    expect(metric('staleServes', 'quote')).toBeGreaterThanOrEqual(60);
    await waitFor(
      'the refresh filled',
      async () => (await quotes[2].quote('AAA')).load !== first.load,
      5000,
    );
    expect(backend.loads).toBe(2); // the first load and exactly one refresh
  });

  it('a failing loader: callers keep the stale value until grace ends, then get the error', async () => {
    const first = await quotes[0].quote('BBB');
    const filledAt = Date.now();
    backend.failing = true;
    await delay(TTL + 50);
    while (Date.now() - filledAt < TTL + GRACE - 300) {
      const values = await Promise.all(quotes.map((q) => q.quote('BBB')));
      expect(values.every((v) => v.load === first.load)).toBe(true);
      await delay(50);
    }
    expect(metric('failSafes', 'quote')).toBeGreaterThan(0);
    // Refreshes back off (100 ms) instead of running on every call.
    expect(backend.loads).toBeLessThan(((GRACE - 300) / 100 + 2) * 3 + 1);
    await waitFor(
      'grace over',
      async () => (await redis.exists(`${prefix}{quote:BBB}`)) === 0,
      5000,
    );
    await expect(quotes[1].quote('BBB')).rejects.toThrow('backend down');
  });

  it('soft timeout: a caller with a stale value gets it after the soft limit, and the load fills later', async () => {
    const first = await quotes[0].soft('CCC');
    await delay(TTL + 50);
    backend.delayMs = 800;
    const started = Date.now();
    expect((await quotes[0].soft('CCC')).load).toBe(first.load);
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(45);
    expect(took).toBeLessThan(600);
    await waitFor(
      'the slow load filled',
      async () => (await quotes[0].soft('CCC')).load !== first.load,
      5000,
    );
    expect(backend.loads).toBe(2);
  });

  it('hard timeout: callers get a StampedeTimeoutError, the signal is aborted, the load may still fill', async () => {
    backend.delayMs = 600;
    const started = Date.now();
    const calls = await Promise.allSettled(Array.from({ length: 10 }, () => quotes[0].hard('DDD')));
    expect(Date.now() - started).toBeLessThan(450);
    for (const call of calls) {
      expect(call.status).toBe('rejected');
      expect((call as PromiseRejectedResult).reason).toBeInstanceOf(StampedeTimeoutError);
    }
    expect(metric('timeouts', 'hard')).toBe(1); // one load, ten callers
    // This loader ignores the signal (it only notes it was aborted): it finishes and fills.
    await waitFor(
      'the late load filled',
      async () => (await redis.exists(`${prefix}{hard:DDD}`)) === 1,
      5000,
    );
    expect(backend.aborted).toBe(1);
    backend.delayMs = 0;
    expect(await quotes[0].hard('DDD')).toEqual({ symbol: 'DDD', load: 1 });
    expect(backend.loads).toBe(1);
  });
});

describe('bad grace, timeout and tags options stop the app at start-up, naming the method', () => {
  const cases: [string, () => object, RegExp][] = [
    [
      'grace 0',
      () => {
        class S {
          @Cacheable({ grace: 0 })
          async m() {
            return 1;
          }
        }
        return S;
      },
      /^S\.m: grace must be a positive duration/,
    ],
    [
      'soft > hard',
      () => {
        class S {
          @Cacheable({ grace: '1m', timeout: { soft: '2s', hard: '1s' } })
          async m() {
            return 1;
          }
        }
        return S;
      },
      /^S\.m: timeout.soft \(2000 ms\) is longer than timeout.hard \(1000 ms\)/,
    ],
    [
      'tags not strings',
      () => {
        class S {
          @Cacheable({ tags: ['ok', 42 as unknown as string] })
          async m() {
            return 1;
          }
        }
        return S;
      },
      /^S\.m: tags must be an array of non-empty strings/,
    ],
  ];

  it.each(cases)('%s', async (_name, make, message) => {
    const provider = make() as new () => object;
    Injectable()(provider);
    const init = Test.createTestingModule({
      imports: [StampedeModule.forRoot({})],
      providers: [provider],
    })
      .compile()
      .then((m) => m.init());
    await expect(init).rejects.toThrow(StampedeConfigError);
    await expect(init).rejects.toThrow(message);
  });

  it('a tags function that returns something else rejects the call, naming the method', async () => {
    @Injectable()
    class S {
      @Cacheable({ tags: (id: string) => [id] })
      async m(id: unknown) {
        return id;
      }
    }
    const moduleRef = await Test.createTestingModule({
      imports: [StampedeModule.forRoot({})],
      providers: [S],
    }).compile();
    await moduleRef.init();
    await expect(moduleRef.get(S).m(7)).rejects.toThrow(
      /^S\.m: tags must be an array of non-empty strings, got \[7\]/,
    );
    expect(await moduleRef.get(S).m('fine')).toBe('fine');
    await moduleRef.close();
  });
});
