import { Injectable } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  Cacheable,
  SingleFlight,
  StampedeModule,
  StampedeService,
} from '@nest-redis-resilience/stampede';
import { REDIS_URL, delay, deleteKeys, uniquePrefix } from './support/redis';

@Injectable()
class PriceService {
  loads = new Map<string, number>();

  @Cacheable({ ttl: 5000 })
  @SingleFlight()
  async price(symbol: string): Promise<{ symbol: string; price: number }> {
    this.loads.set(symbol, (this.loads.get(symbol) ?? 0) + 1);
    await delay(50);
    return { symbol, price: symbol.length * 100 };
  }

  /** @Cacheable alone: single-flight by default. */
  @Cacheable({ ttl: 5000 })
  async quote(symbol: string): Promise<string> {
    this.loads.set(`q${symbol}`, (this.loads.get(`q${symbol}`) ?? 0) + 1);
    await delay(50);
    return `${symbol}:1`;
  }

  /** Opted out: every concurrent miss runs the method. */
  @Cacheable({ ttl: 5000, singleFlight: false })
  async quoteEach(symbol: string): Promise<string> {
    this.loads.set(`e${symbol}`, (this.loads.get(`e${symbol}`) ?? 0) + 1);
    await delay(50);
    return `${symbol}:1`;
  }

  @SingleFlight()
  async uncached(id: number): Promise<number> {
    this.loads.set(`u${id}`, (this.loads.get(`u${id}`) ?? 0) + 1);
    await delay(20);
    return id * 2;
  }
}

describe('single-flight against a real Redis', () => {
  const prefix = uniquePrefix('single-flight');
  let moduleRef: TestingModule;
  let service: PriceService;
  let redis: Redis;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    moduleRef = await Test.createTestingModule({
      // A generous timeout: on a loaded machine the cache write must not time out (and be skipped).
      imports: [
        StampedeModule.forRoot({ redis: REDIS_URL, keyPrefix: prefix, operationTimeout: 5000 }),
      ],
      providers: [PriceService],
    }).compile();
    await moduleRef.init();
    service = moduleRef.get(PriceService);
  });

  afterAll(async () => {
    await moduleRef.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('1000 concurrent calls for one key run the loader once and all get the value', async () => {
    const results = await Promise.all(Array.from({ length: 1000 }, () => service.price('BTC')));
    expect(service.loads.get('BTC')).toBe(1);
    expect(results.every((r) => r.price === 300 && r.symbol === 'BTC')).toBe(true);
    // the value is in Redis under the prefix
    expect(await redis.exists(`${prefix}{PriceService.price:"BTC"}`)).toBe(1);
    const metrics = moduleRef.get(StampedeService).metrics()['PriceService.price'];
    expect(metrics).toMatchObject({ calls: 1000, loads: 1, joins: 999, misses: 1000 });
  });

  it('1000 concurrent calls over 10 keys run the loader once per key', async () => {
    const symbols = Array.from({ length: 10 }, (_, i) => `SYM${i}`);
    const results = await Promise.all(
      Array.from({ length: 1000 }, (_, i) => service.price(symbols[i % 10])),
    );
    for (const s of symbols) expect(service.loads.get(s)).toBe(1);
    results.forEach((r, i) => expect(r.symbol).toBe(symbols[i % 10]));
  });

  it('a later call is a cache hit', async () => {
    await service.price('ETH');
    await service.price('ETH');
    expect(service.loads.get('ETH')).toBe(1);
  });

  it('@Cacheable alone coalesces: 1000 concurrent calls for one key, one load', async () => {
    const results = await Promise.all(Array.from({ length: 1000 }, () => service.quote('SOL')));
    expect(new Set(results)).toEqual(new Set(['SOL:1']));
    expect(service.loads.get('qSOL')).toBe(1);
  });

  it('@Cacheable({ singleFlight: false }) opts out: concurrent misses each run the method', async () => {
    const results = await Promise.all(Array.from({ length: 100 }, () => service.quoteEach('ADA')));
    expect(new Set(results)).toEqual(new Set(['ADA:1']));
    expect(service.loads.get('eADA')).toBeGreaterThan(1);
  });

  it('getOrLoad() without a policy coalesces too', async () => {
    const stampede = moduleRef.get(StampedeService);
    let loads = 0;
    const load = async () => {
      loads++;
      await delay(50);
      return 42;
    };
    const values = await Promise.all(
      Array.from({ length: 200 }, () => stampede.getOrLoad('answer', load)),
    );
    expect(new Set(values)).toEqual(new Set([42]));
    expect(loads).toBe(1);
  });

  it('@SingleFlight alone shares in-flight calls but caches nothing', async () => {
    const first = await Promise.all(Array.from({ length: 100 }, () => service.uncached(7)));
    expect(first.every((v) => v === 14)).toBe(true);
    expect(service.loads.get('u7')).toBe(1);
    await service.uncached(7);
    expect(service.loads.get('u7')).toBe(2);
  });
});
