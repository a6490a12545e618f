import { CACHE_MANAGER, CacheModule } from '@nestjs/cache-manager';
import { Injectable, Logger, Module } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import type { Cache } from 'cache-manager';
import {
  Cacheable,
  DistLock,
  SingleFlight,
  STAMPEDE_STORE,
  StampedeModule,
  StampedeStore,
} from '@nest-redis-resilience/stampede';
import { REDIS_URL, delay } from './support/redis';

@Injectable()
class SlowService {
  loads = 0;

  @Cacheable({ key: (id: number) => `slow:${id}`, ttl: 10_000 })
  @SingleFlight()
  @DistLock({ ttl: 2000, poll: 5 })
  async find(id: number): Promise<{ id: number }> {
    this.loads++;
    await delay(20);
    return { id };
  }
}

async function exercise(moduleRef: TestingModule): Promise<SlowService> {
  const service = moduleRef.get(SlowService);
  const values = await Promise.all(Array.from({ length: 200 }, () => service.find(1)));
  expect(values.every((v) => v.id === 1)).toBe(true);
  await service.find(1);
  expect(service.loads).toBe(1);
  return service;
}

describe('stores', () => {
  it('without redis: the in-memory store (one process)', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [StampedeModule.forRoot({})],
      providers: [SlowService],
    }).compile();
    await moduleRef.init();
    expect(moduleRef.get<StampedeStore>(STAMPEDE_STORE).name).toBe('memory');
    await exercise(moduleRef);
    // values are copies, as with Redis: mutating a result does not change the cache
    const first = await moduleRef.get(SlowService).find(1);
    first.id = 99;
    expect((await moduleRef.get(SlowService).find(1)).id).toBe(1);
    await moduleRef.close();
  });

  it('cacheManager: values go through the app cache; a start-up warning says locks are per process', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const moduleRef = await Test.createTestingModule({
      imports: [
        CacheModule.register({ isGlobal: true }),
        StampedeModule.forRootAsync({
          inject: [CACHE_MANAGER],
          useFactory: (cache: Cache) => ({ cacheManager: cache }),
        }),
      ],
      providers: [SlowService],
    }).compile();
    await moduleRef.init();
    expect(
      warn.mock.calls.some(([m]) => /@DistLock locks only within this process/.test(String(m))),
    ).toBe(true);
    warn.mockRestore();
    await exercise(moduleRef);
    const cache = moduleRef.get<Cache>(CACHE_MANAGER);
    expect(JSON.parse((await cache.get<string>('slow:1'))!)).toMatchObject({ v: { id: 1 } });
    await moduleRef.close();
  });

  it('forRootAsync with isGlobal: a feature module uses it without importing it', async () => {
    @Module({ providers: [SlowService], exports: [SlowService] })
    class FeatureModule {}

    const moduleRef = await Test.createTestingModule({
      imports: [
        StampedeModule.forRootAsync({
          isGlobal: true,
          useFactory: async () => ({ redis: REDIS_URL, keyPrefix: `test:async:${process.pid}:` }),
        }),
        FeatureModule,
      ],
    }).compile();
    await moduleRef.init();
    expect(moduleRef.get<StampedeStore>(STAMPEDE_STORE).name).toBe('redis');
    await exercise(moduleRef);
    await moduleRef.get<StampedeStore>(STAMPEDE_STORE).delete('slow:1');
    await moduleRef.close();
  });
});
