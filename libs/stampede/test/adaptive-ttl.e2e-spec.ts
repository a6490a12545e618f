import { Controller, Get, INestApplication, Injectable, Query } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import request from 'supertest';
import {
  Cacheable,
  CacheRoute,
  currentLoadContext,
  DistLock,
  LoadContext,
  StampedeConfigError,
  StampedeModule,
  StampedeService,
} from '@nest-redis-resilience/stampede';
import { REDIS_URL, deleteKeys, uniquePrefix } from './support/redis';
import { waitFor } from '../../../test/support/wait';

interface Token {
  id: string;
  /** How long the token stays valid (ms): the value must not be cached longer. */
  validForMs: number;
  load: number;
}

let tokenLoads = 0;

@Injectable()
class TokenService {
  /** The TTL comes from the data: a token is cached as long as it is valid, no longer. */
  @Cacheable({ key: (id: string) => `token:${id}`, ttl: 60_000 })
  @DistLock()
  async token(id: string, validForMs: number): Promise<Token | null> {
    const load = ++tokenLoads;
    const context = currentLoadContext();
    if (validForMs <= 0) {
      if (context) context.skip = true; // an expired token is not cached
      return null;
    }
    if (context) {
      context.ttl = validForMs;
      context.tags = [`user:${id}`];
    }
    return { id, validForMs, load };
  }

  /** Outside a load there is no context. */
  contextHere(): LoadContext | undefined {
    return currentLoadContext();
  }
}

let quoteRuns = 0;

@Controller('quotes')
class QuotesController {
  /** A route sets the TTL of its cached response from the data too. */
  @Get()
  @CacheRoute({ ttl: '1m' })
  async quote(@Query('symbol') symbol: string) {
    quoteRuns++;
    const context = currentLoadContext();
    if (context) context.ttl = symbol === 'volatile' ? 1500 : '10m';
    return { symbol, price: 42 };
  }
}

/** A loader sets the TTL, grace and tags of the value it returns; two instances on one Redis. */
describe('adaptive TTL: the loader sets TTL, grace and tags (two instances, real Redis)', () => {
  jest.setTimeout(60_000);
  const prefix = uniquePrefix('adaptive');
  let redis: Redis;
  const apps: TestingModule[] = [];

  const start = async () => {
    const app = await Test.createTestingModule({
      imports: [StampedeModule.forRoot({ redis: REDIS_URL, keyPrefix: prefix, l1: true })],
      providers: [TokenService],
    }).compile();
    apps.push(await app.init());
    return { stampede: app.get(StampedeService), tokens: app.get(TokenService) };
  };
  let a: Awaited<ReturnType<typeof start>>;
  let b: Awaited<ReturnType<typeof start>>;
  const pttl = (key: string) => redis.pttl(`${prefix}{${key}}`);

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    a = await start();
    b = await start();
  });

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it("getOrLoad's loader sets the TTL from the data through its context", async () => {
    const policy = { ttl: 60_000 };
    const value = await a.stampede.getOrLoad(
      'quote:1',
      async (_signal, ctx) => {
        ctx.ttl = '2s'; // e.g. the upstream's Cache-Control max-age
        return { price: 10 };
      },
      policy,
    );
    expect(value).toEqual({ price: 10 });
    const ttl = await pttl('quote:1');
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(2000);
    const loader = jest.fn(() => ({ price: 11 }));
    expect(await b.stampede.getOrLoad('quote:1', loader, policy)).toEqual({ price: 10 });
    expect(loader).not.toHaveBeenCalled();
  });

  it('the TTL set by the loader is the one honoured: the value expires then on both instances', async () => {
    let n = 0;
    const loader = async (_signal: AbortSignal, ctx: LoadContext) => {
      ctx.ttl = 300;
      return ++n;
    };
    expect(await a.stampede.getOrLoad('short:1', loader, { ttl: 60_000 })).toBe(1);
    expect(await b.stampede.getOrLoad('short:1', loader, { ttl: 60_000 })).toBe(1);
    await waitFor(
      'the value expires on B',
      async () => (await b.stampede.getOrLoad('short:1', loader, { ttl: 60_000 })) > 1,
    );
  });

  it('a decorated method sets TTL and tags through currentLoadContext(); the tags invalidate it on the other instance', async () => {
    const token = await a.tokens.token('u1', 5000);
    expect(token).toMatchObject({ id: 'u1', load: tokenLoads });
    const ttl = await pttl('token:u1');
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(5000);
    expect(await b.tokens.token('u1', 5000)).toEqual(token); // served from Redis
    const loadsBefore = tokenLoads;
    await b.stampede.invalidateTags(['user:u1']); // a tag only the loader gave
    await waitFor('A drops it', async () => (await a.stampede.get('token:u1')) === undefined);
    expect((await a.tokens.token('u1', 5000))?.load).toBe(loadsBefore + 1);
  });

  it('skip: the value is returned but not cached', async () => {
    const before = tokenLoads;
    expect(await a.tokens.token('expired', 0)).toBeNull();
    expect(await redis.exists(`${prefix}{token:expired}`)).toBe(0);
    expect(await b.tokens.token('expired', 0)).toBeNull();
    expect(tokenLoads).toBe(before + 2);
  });

  it('grace set by the loader is stored with the value: expire() keeps it stale for a refresh', async () => {
    let n = 0;
    const loader = async (_signal: AbortSignal, ctx: LoadContext) => {
      ctx.grace = '1m';
      return ++n;
    };
    expect(await a.stampede.getOrLoad('graced:1', loader)).toBe(1); // the policy has no grace
    await a.stampede.expire('graced:1');
    expect(await b.stampede.getOrLoad('graced:1', loader)).toBe(1); // stale, at once
    await waitFor('refreshed', async () => (await b.stampede.get('graced:1')) === 2);
    expect(n).toBe(2);
  });

  it('a @CacheRoute handler sets the TTL of its response through currentLoadContext()', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [StampedeModule.forRoot({ redis: REDIS_URL, keyPrefix: prefix })],
      controllers: [QuotesController],
    }).compile();
    const http: INestApplication = moduleRef.createNestApplication({ logger: false });
    await http.init();
    try {
      await request(http.getHttpServer()).get('/quotes?symbol=volatile').expect(200);
      await request(http.getHttpServer()).get('/quotes?symbol=steady').expect(200);
      const hit = await request(http.getHttpServer()).get('/quotes?symbol=volatile').expect(200);
      expect(hit.body).toEqual({ symbol: 'volatile', price: 42 });
      expect(quoteRuns).toBe(2);
      const volatile = await pttl('route:GET /quotes?symbol=volatile');
      expect(volatile).toBeGreaterThan(0);
      expect(volatile).toBeLessThanOrEqual(1500);
      expect(await pttl('route:GET /quotes?symbol=steady')).toBeGreaterThan(60_000);
    } finally {
      await http.close();
    }
  });

  it('outside a load there is no context; a bad TTL fails the call and caches nothing', async () => {
    expect(a.tokens.contextHere()).toBeUndefined();
    await expect(
      a.stampede.getOrLoad(
        'bad:1',
        (_signal, ctx) => {
          ctx.ttl = 'soon';
          return 1;
        },
        { lock: true },
      ),
    ).rejects.toThrow(StampedeConfigError);
    expect(await redis.exists(`${prefix}{bad:1}`)).toBe(0);
    // The lock was released: another instance loads at once.
    expect(
      await b.stampede.getOrLoad('bad:1', () => 2, { lock: { ttl: 30_000, wait: 30_000 } }),
    ).toBe(2);
  });
});
