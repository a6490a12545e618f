import {
  Controller,
  Get,
  Header,
  Headers,
  INestApplication,
  Query,
  Res,
  Type,
} from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import { request as httpRequest } from 'node:http';
import { CacheRoute, StampedeModule, StampedeService } from '@nest-redis-resilience/stampede';
import { waitFor } from '../../../test/support/wait';
import { REDIS_URL, deleteKeys, uniquePrefix } from './support/redis';

let runs: Record<string, number> = {};
const ran = (route: string) => (runs[route] = (runs[route] ?? 0) + 1);

/** Holds the crowd route's handlers until every request is in place. */
let release: () => void = () => undefined;
let opened = Promise.resolve();
const closeGate = () => (opened = new Promise<void>((resolve) => (release = resolve)));

/** `@Res({ passthrough: true })`: Express' Response and Fastify's reply both have header(). */
interface HeaderSetter {
  header(name: string, value: string): unknown;
}

@Controller('search')
class SearchController {
  @Get()
  @CacheRoute({ ttl: '30s' })
  search(@Query() query: Record<string, unknown>) {
    return { query, run: ran('search') };
  }
}

@Controller('me')
class AccountController {
  @Get('key')
  @CacheRoute({ ttl: '30s' })
  key(@Headers('authorization') auth?: string) {
    return { apiKey: auth ?? null, run: ran('key') };
  }

  @Get('prefs')
  @CacheRoute({ ttl: '30s' })
  prefs(@Headers('cookie') cookie?: string) {
    return { cookie: cookie ?? null, run: ran('prefs') };
  }

  @Get('session')
  @CacheRoute({ ttl: '30s' })
  session(@Res({ passthrough: true }) res: HeaderSetter) {
    const id = `s${ran('session')}`;
    res.header('set-cookie', `sid=${id}; HttpOnly`);
    return { session: id };
  }

  /** Concurrent first visits: each must get its own session, none another's. */
  @Get('crowd')
  @CacheRoute({ ttl: '30s', singleFlight: true })
  async crowd(@Res({ passthrough: true }) res: HeaderSetter) {
    const id = `s${ran('crowd')}`;
    await opened;
    res.header('set-cookie', `sid=${id}; HttpOnly`);
    return { session: id };
  }

  @Get('private')
  @CacheRoute({ ttl: '30s' })
  @Header('Cache-Control', 'private, max-age=60')
  private() {
    return { run: ran('private') };
  }

  @Get('no-store')
  @CacheRoute({ ttl: '30s', privacy: 'public' })
  noStore(@Res({ passthrough: true }) res: HeaderSetter) {
    res.header('cache-control', 'no-store');
    return { run: ran('no-store') };
  }

  @Get('public-key')
  @CacheRoute({ ttl: '30s', privacy: 'public' })
  publicKey(@Headers('authorization') auth?: string) {
    return { apiKey: auth ?? null, run: ran('public-key') };
  }

  @Get('public-session')
  @CacheRoute({ ttl: '30s', privacy: 'public' })
  publicSession(@Res({ passthrough: true }) res: HeaderSetter) {
    const id = `s${ran('public-session')}`;
    res.header('set-cookie', `sid=${id}`);
    return { session: id };
  }

  @Get('per-caller')
  @CacheRoute({ ttl: '30s', vary: ['authorization'] })
  perCaller(@Headers('authorization') auth?: string) {
    return { apiKey: auth ?? null, run: ran('per-caller') };
  }

  @Get('per-user')
  @CacheRoute<{ headers: Record<string, string | undefined> }>({
    ttl: '30s',
    key: (req) => `user:${req.headers.authorization?.replace(/^Bearer /, '') ?? 'anonymous'}`,
    privacy: 'private',
  })
  @Header('Cache-Control', 'private')
  perUser(@Headers('authorization') auth?: string) {
    return { apiKey: auth ?? null, run: ran('per-user') };
  }
}

interface Reply {
  status: number;
  cache: string | undefined;
  setCookie: string[] | undefined;
  body: any;
}

/**
 * A GET with node:http, whose path goes out as given: fetch and undici drop a `#fragment`,
 * which is how a client that writes its own request line sends one.
 */
function get(base: string, path: string, headers: Record<string, string> = {}): Promise<Reply> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, path, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          cache: res.headers['x-cache'] as string | undefined,
          setCookie: res.headers['set-cookie'],
          body: text ? JSON.parse(text) : undefined,
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

const alice = { authorization: 'Bearer alice-key' };
const bob = { authorization: 'Bearer bob-key' };

describe.each(['express', 'fastify'] as const)(
  'route cache security on %s (real Redis)',
  (platform) => {
    jest.setTimeout(60_000);
    let redis: Redis;
    let prefix: string;
    let app: INestApplication | undefined;
    let url: string;

    async function start(controller: Type): Promise<StampedeService> {
      const moduleRef = await Test.createTestingModule({
        imports: [
          StampedeModule.forRoot({
            redis: REDIS_URL,
            keyPrefix: prefix,
            operationTimeout: 10_000,
            connectTimeout: 10_000,
          }),
        ],
        controllers: [controller],
      }).compile();
      app =
        platform === 'fastify'
          ? moduleRef.createNestApplication(new FastifyAdapter(), { logger: ['error', 'warn'] })
          : moduleRef.createNestApplication({ logger: ['error', 'warn'] });
      await app.listen(0, '127.0.0.1');
      url = await app.getUrl();
      return app.get(StampedeService);
    }

    /** The route keys stored under this test's prefix. */
    // The values stored, without the version of the key prefix (`__tag:{}`, see clear()).
    const storedKeys = async () =>
      (await redis.keys(`${prefix}{*`)).map((k) => k.slice(prefix.length)).sort();

    beforeAll(() => {
      redis = new Redis(REDIS_URL);
    });

    beforeEach(() => {
      prefix = uniquePrefix(`route-security-${platform}`);
      runs = {};
      closeGate();
    });

    afterEach(async () => {
      release();
      await app?.close();
      app = undefined;
      await deleteKeys(redis, prefix);
    });

    afterAll(async () => {
      await redis.quit();
    });

    describe('the key is what the handler sees', () => {
      it.each([
        // Fastify hands the handler q=a#X (its router ends the query only at the end of the line).
        ['a fragment inside the query', '/search?q=a#X', '/search?q=a', { q: 'a' }],
        // Fastify takes what follows a # as the query string.
        ['a query after a fragment', '/search#q=evil', '/search', {}],
        // Fastify keeps an escape that is not UTF-8 as it was sent; a URL parser makes it U+FFFD.
        ['an escape that is not UTF-8', '/search?q=%FF', '/search?q=%EF%BF%BD', { q: '\uFFFD' }],
      ])(
        '%s: a raw %p does not fill the entry a normal %p is served from',
        async (_what, attack, normal, query) => {
          await start(SearchController);
          const poisoned = await get(url, attack);
          expect(poisoned.status).toBe(200);
          const visitor = await get(url, normal);
          expect(visitor.status).toBe(200);
          expect(visitor.body.query).toEqual(query);
          // And the entry the visitor filled serves the next visitor.
          expect(await get(url, normal)).toMatchObject({ cache: 'hit', body: visitor.body });
        },
      );

      it('query parameters in another order still share an entry', async () => {
        await start(SearchController);
        expect(await get(url, '/search?b=2&a=1')).toMatchObject({ cache: 'miss' });
        expect(await get(url, '/search?a=1&b=2')).toMatchObject({ cache: 'hit' });
        expect(await get(url, '/search?a=1&a=2')).toMatchObject({ cache: 'miss' });
        expect(await get(url, '/search?a=2&a=1')).toMatchObject({ cache: 'miss' });
        expect(runs.search).toBe(3);
        expect(await storedKeys()).toEqual([
          '{route:GET /search?a=1&a=2}',
          '{route:GET /search?a=1&b=2}',
          '{route:GET /search?a=2&a=1}',
        ]);
      });
    });

    describe('responses that depend on the caller are not shared by default', () => {
      it("a request with Authorization is neither served from nor stored in the cache: an anonymous visitor does not get Alice's key", async () => {
        await start(AccountController);
        const forAlice = await get(url, '/me/key', alice);
        expect(forAlice.body).toEqual({ apiKey: 'Bearer alice-key', run: 1 });
        const anonymous = await get(url, '/me/key');
        expect(anonymous).toMatchObject({ cache: 'miss', body: { apiKey: null, run: 2 } });
        expect(forAlice.cache).toBeUndefined(); // passed through
        // A cached anonymous entry is not served to Bob either.
        expect(await get(url, '/me/key', bob)).toMatchObject({
          body: { apiKey: 'Bearer bob-key' },
        });
        expect(await get(url, '/me/key')).toMatchObject({ cache: 'hit', body: { apiKey: null } });
        expect(runs.key).toBe(3);
      });

      it('a request with a Cookie passes through too', async () => {
        await start(AccountController);
        expect((await get(url, '/me/prefs', { cookie: 'sid=alice' })).body.cookie).toBe(
          'sid=alice',
        );
        expect(await storedKeys()).toEqual([]);
        expect((await get(url, '/me/prefs')).body).toEqual({ cookie: null, run: 2 });
      });

      it('a response that sets a cookie is not stored: the next visitor gets a session of its own', async () => {
        await start(AccountController);
        const first = await get(url, '/me/session');
        expect(first).toMatchObject({ cache: 'miss', body: { session: 's1' } });
        expect(first.setCookie).toEqual(['sid=s1; HttpOnly']);
        const second = await get(url, '/me/session');
        expect(second).toMatchObject({ cache: 'miss', body: { session: 's2' } });
        expect(second.setCookie).toEqual(['sid=s2; HttpOnly']);
        expect(await storedKeys()).toEqual([]);
      });

      it('concurrent requests joined to a load whose response sets a cookie each run their own handler', async () => {
        const stampede = await start(AccountController);
        const replies = Promise.all(Array.from({ length: 20 }, () => get(url, '/me/crowd')));
        await waitFor(
          '20 calls in flight',
          () => stampede.metrics()['AccountController.crowd']?.calls === 20,
          30_000,
        );
        release();
        const all = await replies;
        const sessions = all.map((r) => r.body.session);
        expect(new Set(sessions).size).toBe(20);
        expect(all.every((r) => r.setCookie?.[0] === `sid=${r.body.session}; HttpOnly`)).toBe(true);
        expect(runs.crowd).toBe(20);
        expect(await storedKeys()).toEqual([]);
      });

      it('a response with Cache-Control: private or no-store is not stored', async () => {
        await start(AccountController);
        await get(url, '/me/private');
        await get(url, '/me/no-store');
        expect(await get(url, '/me/private')).toMatchObject({ cache: 'miss', body: { run: 2 } });
        expect(await get(url, '/me/no-store')).toMatchObject({ cache: 'miss', body: { run: 2 } });
        expect(await storedKeys()).toEqual([]);
      });
    });

    describe('the route opts in', () => {
      it("privacy: 'public' caches requests with Authorization and responses that set a cookie (the cookie is not replayed)", async () => {
        await start(AccountController);
        expect((await get(url, '/me/public-key', alice)).cache).toBe('miss');
        // What the route asked for: the response is the same for every caller.
        expect(await get(url, '/me/public-key')).toMatchObject({
          cache: 'hit',
          body: { apiKey: 'Bearer alice-key', run: 1 },
        });
        expect((await get(url, '/me/public-session')).setCookie).toEqual(['sid=s1']);
        const hit = await get(url, '/me/public-session');
        expect(hit).toMatchObject({ cache: 'hit', body: { session: 's1' } });
        expect(hit.setCookie).toBeUndefined();
        expect(await storedKeys()).toEqual([
          '{route:GET /me/public-key}',
          '{route:GET /me/public-session}',
        ]);
      });

      it("vary: ['authorization'] caches per caller", async () => {
        await start(AccountController);
        const replies = [
          await get(url, '/me/per-caller', alice),
          await get(url, '/me/per-caller', bob),
          await get(url, '/me/per-caller', alice),
          await get(url, '/me/per-caller', bob),
        ];
        expect(replies.map((r) => [r.cache, r.body.apiKey])).toEqual([
          ['miss', 'Bearer alice-key'],
          ['miss', 'Bearer bob-key'],
          ['hit', 'Bearer alice-key'],
          ['hit', 'Bearer bob-key'],
        ]);
        // A request with a cookie still passes through: vary does not name it.
        expect(await get(url, '/me/per-caller', { ...alice, cookie: 'a=1' })).toMatchObject({
          cache: undefined,
          body: { run: 3 },
        });
        expect(await get(url, '/me/per-caller')).toMatchObject({ cache: 'miss', body: { run: 4 } });
        expect(runs['per-caller']).toBe(4);
      });

      it("privacy: 'private' with a key that names the caller stores Cache-Control: private responses per caller", async () => {
        await start(AccountController);
        const replies = [
          await get(url, '/me/per-user', alice),
          await get(url, '/me/per-user', { ...alice, cookie: 'a=1' }),
          await get(url, '/me/per-user', bob),
        ];
        expect(replies.map((r) => [r.cache, r.body.apiKey])).toEqual([
          ['miss', 'Bearer alice-key'],
          ['hit', 'Bearer alice-key'],
          ['miss', 'Bearer bob-key'],
        ]);
        expect(await storedKeys()).toEqual(['{route:user:alice-key}', '{route:user:bob-key}']);
      });
    });
  },
);
