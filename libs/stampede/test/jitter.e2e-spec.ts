import { Injectable } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  Cacheable,
  JitterTtl,
  StampedeModule,
  StampedeService,
} from '@nest-redis-resilience/stampede';
import { REDIS_URL, deleteKeys, uniquePrefix } from './support/redis';

const TTL = 100_000;

@Injectable()
class CatalogService {
  @Cacheable({ key: (id: number) => `jitter:${id}`, ttl: TTL })
  @JitterTtl(0.2)
  async jittered(id: number): Promise<number> {
    return id;
  }

  @Cacheable({ key: (id: number) => `plain:${id}`, ttl: TTL })
  async plain(id: number): Promise<number> {
    return id;
  }
}

describe('JitterTtl (real Redis, TTLs read back with PTTL)', () => {
  jest.setTimeout(30_000); // 2000 calls and reads: slow on a busy machine, and only timing-free asserts
  const prefix = uniquePrefix('jitter');
  let moduleRef: TestingModule;
  let redis: Redis;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    moduleRef = await Test.createTestingModule({
      imports: [
        // A busy machine must not turn a slow write into a skipped one: this test reads the TTLs back.
        StampedeModule.forRoot({ redis: REDIS_URL, keyPrefix: prefix, operationTimeout: 10_000 }),
      ],
      providers: [CatalogService],
    }).compile();
    await moduleRef.init();
  });

  afterAll(async () => {
    await moduleRef.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  const pttls = async (kind: string) => {
    const pipeline = redis.pipeline();
    for (let i = 0; i < 1000; i++) pipeline.pttl(`${prefix}{${kind}:${i}}`);
    return (await pipeline.exec())!.map(([, v]) => Number(v));
  };

  it('1000 keys written together expire spread over ttl * (1 +- 0.2)', async () => {
    const service = moduleRef.get(CatalogService);
    const started = Date.now();
    await Promise.all(Array.from({ length: 1000 }, (_, i) => service.jittered(i)));
    expect(moduleRef.get(StampedeService).metrics()['CatalogService.jittered'].storeErrors).toBe(0);
    const ttls = await pttls('jitter');
    const elapsed = Date.now() - started;
    expect(Math.min(...ttls)).toBeGreaterThanOrEqual(TTL * 0.8 - elapsed);
    expect(Math.max(...ttls)).toBeLessThanOrEqual(TTL * 1.2);
    // Spread over the whole window: each fifth of [80 s, 120 s] holds a fair share (uniform: 200).
    // A PTTL is read at most `elapsed` ms after its write: small against a fifth (8 s).
    const buckets = [0, 0, 0, 0, 0];
    for (const t of ttls) {
      const stored = t + elapsed / 2;
      buckets[Math.min(4, Math.max(0, Math.floor((stored - TTL * 0.8) / (TTL * 0.08))))]++;
    }
    for (const b of buckets) expect(b).toBeGreaterThan(120);
  });

  it('without jitter the same 1000 keys expire together', async () => {
    const service = moduleRef.get(CatalogService);
    const started = Date.now();
    await Promise.all(Array.from({ length: 1000 }, (_, i) => service.plain(i)));
    expect(moduleRef.get(StampedeService).metrics()['CatalogService.plain'].storeErrors).toBe(0);
    const ttls = await pttls('plain');
    const elapsed = Date.now() - started;
    expect(Math.max(...ttls) - Math.min(...ttls)).toBeLessThanOrEqual(elapsed + 5);
  });
});
