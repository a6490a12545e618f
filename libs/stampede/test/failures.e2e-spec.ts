import { Injectable, Scope } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  Cacheable,
  DistLock,
  SingleFlight,
  StampedeConfigError,
  StampedeKeyError,
  StampedeModule,
  StampedeService,
  XFetch,
} from '@nest-redis-resilience/stampede';
import { REDIS_URL, delay, deleteKeys, uniquePrefix } from './support/redis';

class BackendDown extends Error {}

@Injectable()
class FlakyService {
  calls = 0;
  fail = true;

  @Cacheable({ key: (id: string) => `flaky:${id}`, ttl: 10_000 })
  @SingleFlight()
  @DistLock({ ttl: 3000, poll: 5 })
  async load(id: string): Promise<string> {
    this.calls++;
    await delay(30);
    if (this.fail) throw new BackendDown(`backend down for ${id}`);
    return `ok-${id}`;
  }

  @Cacheable()
  async byCallback(cb: () => number): Promise<number> {
    return cb();
  }

  nullCalls = 0;
  @Cacheable({ key: (id: string) => `maybe:${id}` })
  async maybe(id: string): Promise<string | null | undefined> {
    this.nullCalls++;
    return id === 'none' ? null : undefined;
  }
}

describe('loader errors and cached nothing (real Redis)', () => {
  const prefix = uniquePrefix('failures');
  let moduleRef: TestingModule;
  let service: FlakyService;
  let redis: Redis;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    moduleRef = await Test.createTestingModule({
      imports: [StampedeModule.forRoot({ redis: REDIS_URL, keyPrefix: prefix })],
      providers: [FlakyService],
    }).compile();
    await moduleRef.init();
    service = moduleRef.get(FlakyService);
  });

  afterAll(async () => {
    await moduleRef.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('a loader that throws: every joined caller gets that error, nothing is cached, the lock is gone, the next call loads again', async () => {
    const settled = await Promise.allSettled(Array.from({ length: 200 }, () => service.load('a')));
    expect(service.calls).toBe(1);
    const reasons = settled.map((s) => (s.status === 'rejected' ? s.reason : s));
    expect(
      reasons.every((r) => r instanceof BackendDown && r.message === 'backend down for a'),
    ).toBe(true);
    expect(await redis.exists(`${prefix}{flaky:a}`)).toBe(0);
    expect(await redis.exists(`${prefix}{flaky:a}:lock`)).toBe(0);

    service.fail = false;
    await expect(service.load('a')).resolves.toBe('ok-a');
    expect(service.calls).toBe(2);
    await expect(service.load('a')).resolves.toBe('ok-a');
    expect(service.calls).toBe(2);
    expect(moduleRef.get(StampedeService).metrics()['FlakyService.load']).toMatchObject({
      errors: 1,
      loads: 2,
    });
  });

  it('null is cached (negative caching); undefined is never cached', async () => {
    expect(await service.maybe('none')).toBeNull();
    expect(await service.maybe('none')).toBeNull();
    expect(service.nullCalls).toBe(1);
    expect(await service.maybe('undef')).toBeUndefined();
    expect(await service.maybe('undef')).toBeUndefined();
    expect(service.nullCalls).toBe(3);
  });

  it('an argument that cannot be a key rejects with a StampedeKeyError that says what to do', async () => {
    const call = service.byCallback(() => 1);
    expect(call).toBeInstanceOf(Promise);
    await expect(call).rejects.toThrow(StampedeKeyError);
    await expect(service.byCallback(() => 1)).rejects.toThrow(/pass a key function/);
  });

  it('invalidate(key) makes the next call load again', async () => {
    service.fail = false;
    const before = service.calls;
    await service.load('inv');
    await service.load('inv');
    await moduleRef.get(StampedeService).invalidate('flaky:inv');
    await service.load('inv');
    expect(service.calls - before).toBe(2);
  });
});

describe('start-up errors', () => {
  const build = (providers: any[], options = {}) =>
    Test.createTestingModule({ imports: [StampedeModule.forRoot(options)], providers })
      .compile()
      .then((m) => m.init());

  it('refuses a decorated method on a request-scoped provider, naming it', async () => {
    @Injectable({ scope: Scope.REQUEST })
    class PerRequest {
      @Cacheable()
      async find(): Promise<number> {
        return 1;
      }
    }
    await expect(build([PerRequest])).rejects.toThrow(
      /PerRequest\.find .*request-scoped.*singleton provider/,
    );
  });

  it.each([
    ['a negative TTL', { ttl: -5 }, /ttl must be a positive duration/],
    ['a TTL that is not a duration', { ttl: 'soon' }, /"soon" is not a duration/],
  ])('rejects %s on @Cacheable', async (_name, options, message) => {
    @Injectable()
    class Bad {
      @Cacheable(options as any)
      async find(): Promise<number> {
        return 1;
      }
    }
    await expect(build([Bad])).rejects.toThrow(message);
  });

  it('rejects beta <= 0', async () => {
    @Injectable()
    class BadBeta {
      @XFetch(0)
      async find(): Promise<number> {
        return 1;
      }
    }
    await expect(build([BadBeta])).rejects.toThrow(StampedeConfigError);
    await expect(build([BadBeta])).rejects.toThrow(
      /BadBeta\.find: XFetch beta must be a number > 0/,
    );
  });

  it('rejects a poll longer than the lock TTL', async () => {
    @Injectable()
    class BadPoll {
      @DistLock(100, 500)
      async find(): Promise<number> {
        return 1;
      }
    }
    await expect(build([BadPoll])).rejects.toThrow(
      /lock poll \(500 ms\) is longer than the lock ttl \(100 ms\)/,
    );
  });

  it('rejects a negative defaultTtl and conflicting stores', async () => {
    await expect(build([], { defaultTtl: -1 })).rejects.toThrow(
      /defaultTtl must be a positive duration/,
    );
    await expect(build([], { redis: REDIS_URL, store: {} })).rejects.toThrow(
      /give one of redis, cacheManager or store/,
    );
  });
});
