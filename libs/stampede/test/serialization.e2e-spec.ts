import { Injectable } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  Cacheable,
  DistLock,
  StampedeError,
  StampedeModule,
  StampedeService,
} from '@nest-redis-resilience/stampede';
import { deleteKeys, REDIS_URL, uniquePrefix } from './support/redis';

@Injectable()
class LedgerService {
  loads = 0;

  @Cacheable({ key: (id: string) => `big:${id}`, ttl: 60_000 })
  @DistLock({ ttl: 5000, poll: 5 })
  async big(id: string): Promise<{ id: string; n: bigint }> {
    this.loads++;
    return { id, n: 1n };
  }

  @Cacheable({ key: (id: string) => `cycle:${id}`, ttl: 60_000 })
  @DistLock({ ttl: 5000, poll: 5 })
  async cyclic(id: string): Promise<Record<string, unknown>> {
    this.loads++;
    const value: Record<string, unknown> = { id };
    value.self = value;
    return value;
  }
}

/**
 * A loader value the serializer cannot write (a BigInt under JSON, a cycle): the caller is told
 * which method and why, the lock is released at once, nothing is cached, and the store is not
 * reported unavailable.
 */
describe.each([
  ['without L1', false],
  ['with L1', true],
])('a value that cannot be serialized (%s)', (_name, l1) => {
  jest.setTimeout(30_000);
  const prefix = uniquePrefix('serialization');
  let redis: Redis;
  let moduleRef: TestingModule;
  let ledger: LedgerService;
  let stampede: StampedeService;
  const storeEvents: string[] = [];

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    moduleRef = await Test.createTestingModule({
      imports: [StampedeModule.forRoot({ redis: REDIS_URL, keyPrefix: prefix, l1 })],
      providers: [LedgerService],
    }).compile();
    await moduleRef.init();
    ledger = moduleRef.get(LedgerService);
    stampede = moduleRef.get(StampedeService);
    stampede.on('stampede.store.unavailable', (e) => storeEvents.push(`unavailable:${e.error}`));
    stampede.on('stampede.store.recovered', () => storeEvents.push('recovered'));
  });

  afterAll(async () => {
    await moduleRef?.close();
    await deleteKeys(redis, prefix);
    await redis?.quit();
  });

  it.each([
    ['big', 'BigInt'],
    ['cyclic', 'circular'],
  ] as const)(
    '%s: rejects with a StampedeError naming the method and the serializer message',
    async (method, why) => {
      const key = method === 'big' ? 'big:a' : 'cycle:a';
      for (let call = 1; call <= 3; call++) {
        const error = (await ledger[method]('a').then(
          () => undefined,
          (err: unknown) => err,
        )) as StampedeError;
        expect(error).toBeInstanceOf(StampedeError);
        expect(error.code).toBe('STAMPEDE_SERIALIZATION');
        expect(error.message).toContain(`LedgerService.${method}`);
        expect(error.message).toContain(why);
        // The lock is gone at once and nothing was cached: the next call does not wait.
        expect(await redis.exists(`${prefix}{${key}}:lock`, `${prefix}{${key}}`)).toBe(0);
      }
      expect(stampede.metrics()[`LedgerService.${method}`]).toMatchObject({
        loads: 3,
        lockWaits: 0,
        storeErrors: 0,
      });
      expect(stampede.l1Stats()?.entries ?? 0).toBe(0);
      expect(storeEvents).toEqual([]);
    },
  );
});
