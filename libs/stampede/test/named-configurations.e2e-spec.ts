import { Injectable, Module } from '@nestjs/common';
import { HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Test, TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  Cacheable,
  CacheableMany,
  DistLock,
  InjectStampede,
  RedisStore,
  StampedeConfigError,
  StampedeModule,
  StampedeNamespace,
  StampedeService,
  getStampedeToken,
} from '@nest-redis-resilience/stampede';
import {
  StampedeHealthIndicator,
  StampedeHealthModule,
} from '@nest-redis-resilience/stampede/health';
import { REDIS_URL, deleteKeys, uniquePrefix } from './support/redis';
import { waitFor } from '../../../test/support/wait';

jest.setTimeout(60_000);

const defaultPrefix = uniquePrefix('named-default');
const sessionsPrefix = uniquePrefix('named-sessions');
/** The `sessions` configuration lives in another Redis database: another Redis to the module. */
const sessionsUrl = Object.assign(new URL(REDIS_URL), { pathname: '/1' }).toString();

/** Loads by configuration and key, across both instances of this file. */
const loads = new Map<string, number>();
const load = (what: string) => {
  const n = (loads.get(what) ?? 0) + 1;
  loads.set(what, n);
  return `${what}#${n}`;
};

@Injectable()
class ProfileService {
  @Cacheable({ key: (id: string) => `user:${id}`, ttl: 60_000 })
  @DistLock({ ttl: 5000, poll: 5 })
  async profile(id: string): Promise<string> {
    await new Promise((resolve) => setTimeout(resolve, 50));
    return load(`default:user:${id}`);
  }

  @Cacheable({ stampede: 'sessions', key: (id: string) => `user:${id}`, ttl: 60_000 })
  @DistLock({ ttl: 5000, poll: 5 })
  async session(id: string): Promise<string> {
    await new Promise((resolve) => setTimeout(resolve, 50));
    return load(`sessions:user:${id}`);
  }

  @Cacheable({ namespace: 'billing', key: (id: string) => `user:${id}`, tags: ['users'] })
  async invoice(id: string): Promise<string> {
    return load(`billing-decorated:user:${id}`);
  }

  /** Many sessions at once, in the `sessions` configuration, under `batch:`. */
  @CacheableMany({ stampede: 'sessions', namespace: 'batch', key: (id: string) => `user:${id}` })
  async sessions(ids: string[]): Promise<string[]> {
    return ids.map((id) => load(`sessions-batch:user:${id}`));
  }
}

@Injectable()
class BillingService {
  constructor(@InjectStampede({ namespace: 'billing' }) readonly cache: StampedeNamespace) {}

  find(id: string): Promise<string> {
    return this.cache.getOrLoad(`user:${id}`, async () => load(`billing:user:${id}`), {
      tags: ['users'],
    });
  }
}

@Module({
  imports: [StampedeModule.forFeature({ namespace: 'billing' })],
  providers: [BillingService],
  exports: [BillingService],
})
class BillingModule {}

@Injectable()
class UsersService {
  constructor(@InjectStampede({ namespace: 'users' }) readonly cache: StampedeNamespace) {}

  find(id: string): Promise<string> {
    return this.cache.getOrLoad(`user:${id}`, async () => load(`users:user:${id}`), {
      tags: ['users'],
    });
  }
}

@Module({
  imports: [StampedeModule.forFeature({ namespace: 'users' })],
  providers: [UsersService],
  exports: [UsersService],
})
class UsersModule {}

@Injectable()
class Injected {
  constructor(
    @InjectStampede() readonly byDefault: StampedeService,
    readonly byType: StampedeService,
    @InjectStampede('sessions') readonly sessions: StampedeService,
  ) {}
}

async function startInstance(): Promise<TestingModule> {
  const app = await Test.createTestingModule({
    imports: [
      TerminusModule.forRoot({ logger: false }),
      StampedeModule.forRoot({ redis: REDIS_URL, keyPrefix: defaultPrefix, l1: true }),
      StampedeModule.forRootAsync({
        name: 'sessions',
        useFactory: () => ({ redis: sessionsUrl, keyPrefix: sessionsPrefix, l1: true }),
      }),
      StampedeHealthModule,
      BillingModule,
      UsersModule,
    ],
    providers: [ProfileService, Injected],
  }).compile();
  return app.init();
}

describe('named configurations and namespaces (two instances, real Redis)', () => {
  const apps: TestingModule[] = [];
  let db0: Redis;
  let db1: Redis;

  beforeAll(async () => {
    db0 = new Redis(REDIS_URL);
    db1 = new Redis(sessionsUrl);
    apps.push(await startInstance(), await startInstance());
  });

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    await deleteKeys(db0, defaultPrefix);
    await deleteKeys(db1, sessionsPrefix);
    await Promise.all([db0.quit(), db1.quit()]);
  });

  it('each configuration uses its own Redis and prefix: one load per configuration across two instances', async () => {
    const calls = apps.flatMap((app) => {
      const profiles = app.get(ProfileService);
      return Array.from({ length: 100 }, (_, i) =>
        i % 2 ? profiles.profile('1') : profiles.session('1'),
      );
    });
    const values = await Promise.all(calls);

    expect(loads.get('default:user:1')).toBe(1);
    expect(loads.get('sessions:user:1')).toBe(1);
    expect(new Set(values)).toEqual(new Set(['default:user:1#1', 'sessions:user:1#1']));
    expect(await db0.exists(`${defaultPrefix}{user:1}`)).toBe(1);
    expect(await db1.exists(`${sessionsPrefix}{user:1}`)).toBe(1);
    expect(await db0.exists(`${sessionsPrefix}{user:1}`)).toBe(0); // not in the default Redis
  });

  it('@InjectStampede(name) injects that configuration; @InjectStampede() and the type, the default one', () => {
    const injected = apps[0].get(Injected);
    expect(injected.byDefault).toBe(injected.byType);
    expect(injected.sessions).toBeInstanceOf(StampedeService);
    expect(injected.sessions).not.toBe(injected.byDefault);
    expect(apps[0].get(getStampedeToken('sessions'))).toBe(injected.sessions);
  });

  it("invalidating a configuration's key reaches the other instance, and leaves the other configuration's key alone", async () => {
    const [a, b] = apps;
    const before = await b.get(ProfileService).session('2');
    const other = await b.get(ProfileService).profile('2');
    await a.get(Injected).sessions.invalidate('user:2');

    // B held the value in L1: the invalidation message of the `sessions` bus drops it there.
    await waitFor('B reloads the invalidated key', async () => {
      return (await b.get(ProfileService).session('2')) !== before;
    });
    expect(await b.get(ProfileService).profile('2')).toBe(other);
  });

  it('two feature namespaces with the same key and tag do not share values or invalidations', async () => {
    const [a, b] = apps;
    const billing = await a.get(BillingService).find('3');
    const users = await a.get(UsersService).find('3');
    expect(billing).toMatch(/^billing:user:3#/);
    expect(users).toMatch(/^users:user:3#/);
    expect(await db0.exists(`${defaultPrefix}{billing:user:3}`)).toBe(1);
    expect(await db0.exists(`${defaultPrefix}{users:user:3}`)).toBe(1);
    expect(await b.get(BillingService).find('3')).toBe(billing); // read from Redis on B

    await a.get(BillingService).cache.invalidateTags(['users']);

    await waitFor('B reloads the billing value', async () => {
      return (await b.get(BillingService).find('3')) !== billing;
    });
    expect(await b.get(UsersService).find('3')).toBe(users); // same tag, other namespace
  });

  it("a namespace's get, set and clear: clear drops its values on both instances, and no other namespace's", async () => {
    const [a, b] = apps;
    const billingA = a.get(BillingService).cache;
    const billingB = b.get(BillingService).cache;
    await billingA.set('plan:7', 'gold', { tags: ['plans'] });
    expect(await billingB.get('plan:7')).toBe('gold');
    expect(await a.get(StampedeService).get('billing:plan:7')).toBe('gold');
    const users = await a.get(UsersService).find('8');
    const billing = await a.get(BillingService).find('8');
    expect(await b.get(BillingService).find('8')).toBe(billing);

    await billingB.clear();

    await waitFor('A sees the billing namespace cleared', async () => {
      return (await billingA.get('plan:7')) === undefined;
    });
    expect(await billingB.get('plan:7')).toBeUndefined();
    expect(await a.get(BillingService).find('8')).not.toBe(billing); // loaded again
    expect(await a.get(UsersService).find('8')).toBe(users); // another namespace: kept
    expect(await b.get(UsersService).find('8')).toBe(users);
  });

  it('the root service reaches a namespace as `<namespace>:`, and a decorated method can join it', async () => {
    const [a] = apps;
    const invoice = await a.get(ProfileService).invoice('4');
    expect(await db0.exists(`${defaultPrefix}{billing:user:4}`)).toBe(1);
    const viaService = await a.get(BillingService).find('4');
    expect(viaService).toBe(invoice); // one key: billing:user:4

    await a.get(StampedeService).invalidate('billing:user:4');
    expect(await a.get(BillingService).find('4')).not.toBe(invoice);
  });

  it('batch loads: @CacheableMany and StampedeNamespace.getOrLoadMany keep their keys in their namespace', async () => {
    const [a, b] = apps;
    const first = await a.get(ProfileService).sessions(['5', '6']);
    expect(first).toEqual(['sessions-batch:user:5#1', 'sessions-batch:user:6#1']);
    expect(await db1.exists(`${sessionsPrefix}{batch:user:5}`)).toBe(1);
    expect(await b.get(ProfileService).sessions(['6', '5'])).toEqual([first[1], first[0]]);

    const asked: string[][] = [];
    const many = (app: TestingModule) =>
      app.get(BillingService).cache.getOrLoadMany(['m1', 'm2'], (keys) => {
        asked.push(keys);
        return new Map(keys.map((key) => [key, load(`billing-many:${key}`)]));
      });
    const values = await many(a);
    expect(asked).toEqual([['m1', 'm2']]); // the loader sees the keys as given
    expect(await db0.exists(`${defaultPrefix}{billing:m1}`)).toBe(1);
    expect(await many(b)).toEqual(values); // read from Redis on B, no load
    expect(asked).toHaveLength(1);
  });

  it('the health indicator has one entry per configuration', async () => {
    const [a] = apps;
    const indicator = a.get(StampedeHealthIndicator);
    const result = await a.get(HealthCheckService).check(indicator.checks({ key: 'cache' }));
    expect(result.status).toBe('ok');
    expect(Object.keys(result.details).sort()).toEqual(['cache', 'cache:sessions']);
    expect(result.details['cache:sessions']).toMatchObject({ status: 'up', store: 'redis' });
    expect(await indicator.isHealthy('sessions', { name: 'sessions' })).toMatchObject({
      sessions: { status: 'up', store: 'redis' },
    });
  });
});

describe('named configurations: shutdown', () => {
  it("app.close() closes every configuration's Redis clients", async () => {
    const app = await startInstance();
    const stores = [
      app.get(StampedeService).store,
      app.get<StampedeService>(getStampedeToken('sessions')).store,
    ] as RedisStore[];
    expect(stores.map((store) => store.client.status)).toEqual(['ready', 'ready']);
    await app.close();
    await waitFor('both clients end', () => stores.every((store) => store.client.status === 'end'));
  });
});

describe('named configurations: start-up errors', () => {
  const compile = async (imports: unknown[], providers: unknown[] = []) => {
    const app = await Test.createTestingModule({
      imports: imports as never[],
      providers: providers as never[],
    }).compile();
    try {
      await app.init();
    } finally {
      await app.close();
    }
  };

  it('a method naming a configuration the app does not have', async () => {
    @Injectable()
    class Lost {
      @Cacheable({ stampede: 'sesions' })
      async find(): Promise<number> {
        return 1;
      }
    }
    const error = await compile([StampedeModule.forRoot({})], [Lost]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StampedeConfigError);
    expect((error as Error).message).toContain(
      "Lost.find uses the stampede configuration 'sesions'",
    );
    expect((error as Error).message).toContain("the app has 'default'");
  });

  it('a namespace of a configuration the app does not have', async () => {
    const error = await compile([
      StampedeModule.forRoot({}),
      StampedeModule.forFeature({ namespace: 'billing', name: 'sessions' }),
    ]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StampedeConfigError);
    expect((error as Error).message).toContain("needs the configuration 'sessions'");
  });

  it('an empty name or namespace', () => {
    expect(() => StampedeModule.forRoot({ name: '' })).toThrow(StampedeConfigError);
    expect(() => StampedeModule.forFeature({ namespace: '' })).toThrow(StampedeConfigError);
  });

  it('a named configuration alone does not provide StampedeService by type', async () => {
    @Injectable()
    class WantsDefault {
      constructor(readonly stampede: StampedeService) {}
    }
    await expect(
      compile([StampedeModule.forRoot({ name: 'sessions' })], [WantsDefault]),
    ).rejects.toThrow(/StampedeService/);
  });
});
