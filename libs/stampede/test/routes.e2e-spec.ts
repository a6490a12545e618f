import {
  Body,
  Controller,
  Get,
  Headers,
  INestApplication,
  LogLevel,
  Post,
  Query,
  Res,
  ServiceUnavailableException,
  Type,
  UseInterceptors,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  Cacheable,
  CacheRoute,
  DistLock,
  JitterTtl,
  routeCacheKey,
  SingleFlight,
  StampedeConfigError,
  StampedeInterceptor,
  StampedeModule,
  StampedeService,
} from '@nest-redis-resilience/stampede';
import { waitFor } from '../../../test/support/wait';
import { REDIS_URL, delay, deleteKeys, uniquePrefix } from './support/redis';

/** Handler runs per route, across every app of a test (two apps share one count). */
let runs: Record<string, number> = {};
const ran = (route: string) => (runs[route] = (runs[route] ?? 0) + 1);

/** Holds handlers until the test has every request in place. */
class Gate {
  private release!: () => void;
  private readonly opened = new Promise<void>((resolve) => (this.release = resolve));
  wait(): Promise<void> {
    return this.opened;
  }
  open(): void {
    this.release();
  }
}
let gate = new Gate();
let flakyFails = true;
const notes: string[] = [];

@Controller('items')
class ItemsController {
  @Get('hot')
  @CacheRoute({ ttl: '30s' })
  @SingleFlight()
  async hot(@Query('id') id: string) {
    const run = ran('hot');
    await gate.wait();
    return { id, run };
  }

  @Get('plain')
  @CacheRoute({ ttl: '30s' })
  plain(@Query() query: Record<string, string>) {
    return { query, run: ran('plain') };
  }

  @Get('flaky')
  @CacheRoute({ ttl: '30s', singleFlight: true })
  async flaky() {
    const run = ran('flaky');
    await gate.wait();
    if (flakyFails) throw new ServiceUnavailableException('backend down');
    return { ok: true, run };
  }

  @Get('nothing')
  @CacheRoute()
  nothing(): undefined {
    ran('nothing');
    return undefined;
  }

  @Get('bytes')
  @CacheRoute()
  bytes() {
    ran('bytes');
    return Buffer.from('not JSON');
  }

  @Get('greeting')
  @CacheRoute({ ttl: '30s', vary: ['Accept-Language'] })
  greeting(@Headers('accept-language') lang?: string) {
    ran('greeting');
    return { greeting: lang === 'fr' ? 'bonjour' : 'hello', lang: lang ?? null };
  }

  @Get('fresh')
  // Recomputes at the first hit past half the TTL (the earliest XFetch may), nearly always.
  @CacheRoute({ ttl: '2s', xfetch: { beta: 1e6 } })
  async fresh() {
    const run = ran('fresh');
    await delay(20);
    return { run };
  }
}

/** `@CacheRoute()` on the class: every GET route cached, other methods untouched. */
@Controller('notes')
@CacheRoute({ ttl: '30s' })
class NotesController {
  @Get()
  list() {
    ran('notes.list');
    return { notes };
  }

  @Post()
  add(@Body() body: { text: string }) {
    ran('notes.add');
    notes.push(body.text);
    return { count: notes.length };
  }
}

/** Only the method decorators, with the interceptor bound on the controller. */
@Controller('decorated')
@UseInterceptors(StampedeInterceptor)
class DecoratedController {
  @Get()
  @Cacheable({ ttl: '30s' })
  @SingleFlight()
  value() {
    return { run: ran('decorated') };
  }
}

@Controller('report')
class ReportController {
  @Get()
  @CacheRoute({ ttl: '30s' })
  @SingleFlight()
  @DistLock({ ttl: '30s' }) // longer than the test can take: no waiter takes over
  async report() {
    const run = ran('report');
    await gate.wait();
    return { run };
  }
}

/** Served by a global StampedeInterceptor (APP_INTERCEPTOR). */
@Controller('global')
class GlobalController {
  @Get('bare')
  @Cacheable({ ttl: '30s' })
  bare() {
    return { run: ran('global.bare') };
  }

  @Get('both') // bound twice: globally and by @CacheRoute
  @CacheRoute({ ttl: '30s' })
  both() {
    return { run: ran('global.both') };
  }
}

type Platform = 'express' | 'fastify';

interface RunningApp {
  app: INestApplication;
  url: string;
  stampede: StampedeService;
}

interface Reply {
  status: number;
  cache: string | null;
  body: any;
}

async function get(
  base: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<Reply> {
  const res = await fetch(base + path, { headers });
  const text = await res.text();
  return {
    status: res.status,
    cache: res.headers.get('x-cache'),
    body: text ? JSON.parse(text) : undefined,
  };
}

async function post(base: string, path: string, body: unknown): Promise<Reply> {
  const res = await fetch(base + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, cache: res.headers.get('x-cache'), body: await res.json() };
}

describe.each<Platform>(['express', 'fastify'])(
  'HTTP route caching on %s (real Redis)',
  (platform) => {
    jest.setTimeout(60_000);
    let redis: Redis;
    let prefix: string;
    let apps: RunningApp[] = [];

    async function start(
      controllers: Type[],
      { global = false, logErrors = true, l1 = false } = {},
    ): Promise<RunningApp> {
      const moduleRef = await Test.createTestingModule({
        imports: [
          StampedeModule.forRoot({
            redis: REDIS_URL,
            keyPrefix: prefix,
            l1,
            // A busy machine must not turn a slow Redis reply into a load without the store.
            operationTimeout: 10_000,
            connectTimeout: 10_000,
          }),
        ],
        controllers,
        providers: global ? [{ provide: APP_INTERCEPTOR, useClass: StampedeInterceptor }] : [],
      }).compile();
      const logger: LogLevel[] | false = logErrors ? ['error', 'warn'] : false;
      const app =
        platform === 'fastify'
          ? moduleRef.createNestApplication(new FastifyAdapter(), { logger })
          : moduleRef.createNestApplication({ logger });
      const running: RunningApp = { app, url: '', stampede: app.get(StampedeService) };
      apps.push(running); // closed in afterEach, even if listen fails
      await app.listen(0, '127.0.0.1');
      running.url = await app.getUrl();
      return running;
    }

    const metrics = (app: RunningApp, name: string) => app.stampede.metrics()[name];
    const stored = (key: string) => redis.exists(`${prefix}{${key}}`);

    beforeAll(() => {
      redis = new Redis(REDIS_URL);
    });

    beforeEach(() => {
      prefix = uniquePrefix(`routes-${platform}`);
      runs = {};
      gate = new Gate();
      flakyFails = true;
      notes.length = 0;
    });

    afterEach(async () => {
      gate.open();
      await Promise.all(apps.map(({ app }) => app.close()));
      apps = [];
      await deleteKeys(redis, prefix);
    });

    afterAll(async () => {
      await redis.quit();
    });

    it('1000 concurrent GETs of one cold route make one handler call: one x-cache miss, 999 hits', async () => {
      const app = await start([ItemsController]);
      const replies = Promise.all(
        Array.from({ length: 1000 }, () => get(app.url, '/items/hot?id=7')),
      );
      // Every request is in the flow before the one handler call may finish.
      await waitFor(
        '1000 calls in flight',
        () => metrics(app, 'ItemsController.hot')?.calls === 1000,
        45_000,
      );
      expect(runs.hot).toBe(1);
      gate.open();
      const all = await replies;

      expect(runs.hot).toBe(1);
      expect(all.every((r) => r.status === 200 && r.body.id === '7' && r.body.run === 1)).toBe(
        true,
      );
      expect(all.filter((r) => r.cache === 'miss')).toHaveLength(1);
      expect(all.filter((r) => r.cache === 'hit')).toHaveLength(999);
      expect(metrics(app, 'ItemsController.hot')).toMatchObject({ loads: 1, joins: 999 });
      expect(await stored('route:GET /items/hot?id=7')).toBe(1);
    });

    it('a later GET is served from Redis (x-cache: hit); query parameters in another order share the entry', async () => {
      const app = await start([ItemsController]);
      const first = await get(app.url, '/items/plain?b=2&a=1');
      const second = await get(app.url, '/items/plain?a=1&b=2');
      expect(first).toEqual({
        status: 200,
        cache: 'miss',
        body: { query: { a: '1', b: '2' }, run: 1 },
      });
      expect(second).toEqual({ ...first, cache: 'hit' });
      expect(runs.plain).toBe(1);
      expect(await stored(routeCacheKey('/items/plain?b=2&a=1'))).toBe(1);
      expect(await stored('route:GET /items/plain?a=1&b=2')).toBe(1);

      const other = await get(app.url, '/items/plain?a=1&b=3');
      expect(other.cache).toBe('miss');
      expect(runs.plain).toBe(2);
    });

    it('a HEAD request shares the GET entry', async () => {
      const app = await start([ItemsController]);
      await get(app.url, '/items/plain?x=1');
      const head = await fetch(`${app.url}/items/plain?x=1`, { method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(head.headers.get('x-cache')).toBe('hit');
      expect(runs.plain).toBe(1);
    });

    it('errors are not cached: the callers joined to a throwing load all get its error, and the next GET runs the handler', async () => {
      const app = await start([ItemsController]);
      const failing = Promise.all(Array.from({ length: 20 }, () => get(app.url, '/items/flaky')));
      await waitFor(
        '20 calls in flight',
        () => metrics(app, 'ItemsController.flaky')?.calls === 20,
        30_000,
      );
      gate.open();
      const failed = await failing;
      expect(runs.flaky).toBe(1);
      expect(failed.every((r) => r.status === 503 && r.body.message === 'backend down')).toBe(true);
      expect(failed.every((r) => r.cache === null)).toBe(true);
      expect(await stored('route:GET /items/flaky')).toBe(0);

      flakyFails = false;
      const ok = await get(app.url, '/items/flaky');
      expect(ok).toEqual({ status: 200, cache: 'miss', body: { ok: true, run: 2 } });
      expect(await get(app.url, '/items/flaky')).toEqual({ ...ok, cache: 'hit' });
      expect(runs.flaky).toBe(2);
    });

    it('a handler that returns undefined is not cached', async () => {
      const app = await start([ItemsController]);
      const replies = [await get(app.url, '/items/nothing'), await get(app.url, '/items/nothing')];
      expect(replies.map((r) => [r.status, r.cache, r.body])).toEqual([
        [200, 'miss', undefined],
        [200, 'miss', undefined],
      ]);
      expect(runs.nothing).toBe(2);
      expect(await stored('route:GET /items/nothing')).toBe(0);
    });

    it('a handler that returns bytes fails with a StampedeConfigError (500) and nothing is stored', async () => {
      const app = await start([ItemsController], { logErrors: false }); // the 500 is expected
      const reply = await get(app.url, '/items/bytes');
      expect(reply.status).toBe(500);
      expect(reply.cache).toBeNull();
      expect(runs.bytes).toBe(1);
      expect(await stored('route:GET /items/bytes')).toBe(0);
    });

    it('a POST is never cached; the GET routes of a @CacheRoute controller are', async () => {
      const app = await start([NotesController]);
      expect(await get(app.url, '/notes')).toMatchObject({ cache: 'miss', body: { notes: [] } });
      const posts = [
        await post(app.url, '/notes', { text: 'a' }),
        await post(app.url, '/notes', { text: 'b' }),
      ];
      expect(posts.map((p) => [p.status, p.cache, p.body.count])).toEqual([
        [201, null, 1],
        [201, null, 2],
      ]);
      expect(runs['notes.add']).toBe(2);
      // The GET entry stays until its TTL or an invalidate().
      expect(await get(app.url, '/notes')).toMatchObject({ cache: 'hit', body: { notes: [] } });
      await app.stampede.invalidate(routeCacheKey('/notes'));
      expect(await get(app.url, '/notes')).toMatchObject({
        cache: 'miss',
        body: { notes: ['a', 'b'] },
      });
      expect(runs['notes.list']).toBe(2);
      const keys = await redis.keys(`${prefix}{*`); // values only, not the prefix version
      expect(keys).toEqual([`${prefix}{route:GET /notes}`]);
    });

    it('vary headers split the cache', async () => {
      const app = await start([ItemsController]);
      const fr = { 'accept-language': 'fr' };
      const en = { 'accept-language': 'en' };
      const replies = [
        await get(app.url, '/items/greeting', fr),
        await get(app.url, '/items/greeting', en),
        await get(app.url, '/items/greeting'),
        await get(app.url, '/items/greeting', fr),
        await get(app.url, '/items/greeting', en),
        await get(app.url, '/items/greeting'),
      ];
      expect(replies.map((r) => [r.cache, r.body.greeting, r.body.lang])).toEqual([
        ['miss', 'bonjour', 'fr'],
        ['miss', 'hello', 'en'],
        ['miss', 'hello', '*'], // fetch sends accept-language: * when not told otherwise
        ['hit', 'bonjour', 'fr'],
        ['hit', 'hello', 'en'],
        ['hit', 'hello', '*'],
      ]);
      expect(runs.greeting).toBe(3);
      expect(await stored(routeCacheKey('/items/greeting', fr))).toBe(1);
      expect(await stored('route:GET /items/greeting accept-language=en')).toBe(1);
      expect(await stored('route:GET /items/greeting accept-language=*')).toBe(1);
    });

    it.each([false, true])(
      'XFetch (l1: %s): the hit that triggers an early recomputation says x-cache: hit, and the handler runs in the background',
      async (l1) => {
        const app = await start([ItemsController], { l1 });
        // The recomputation moment is random: at beta 1e6 its lead is cut to half the TTL, which
        // the second GET has passed, except with probability e^-10 per round (then tried again).
        for (let round = 1; round <= 5; round++) {
          runs = {};
          await app.stampede.invalidate(routeCacheKey('/items/fresh'));
          const before = { ...metrics(app, 'ItemsController.fresh') };
          expect(await get(app.url, '/items/fresh')).toMatchObject({
            cache: 'miss',
            body: { run: 1 },
          });
          await delay(1100); // past half the TTL
          const hit = await get(app.url, '/items/fresh');
          expect(hit).toMatchObject({ cache: 'hit', body: { run: 1 } });
          const after = metrics(app, 'ItemsController.fresh');
          if (after.earlyRecomputes === (before.earlyRecomputes ?? 0)) continue;
          // The value the background run stored is served as a hit: no caller missed again.
          await waitFor('the value of the background run', async () => {
            const reply = await get(app.url, '/items/fresh');
            expect(reply.cache).toBe('hit');
            return reply.body.run === 2;
          });
          expect(metrics(app, 'ItemsController.fresh').misses).toBe((before.misses ?? 0) + 1);
          // With L1 the hits were answered by the in-process tier.
          if (l1) expect(after.l1Hits).toBeGreaterThan(before.l1Hits ?? 0);
          return;
        }
        throw new Error('no early recomputation in 5 rounds');
      },
    );

    it('two apps on one Redis and prefix, @CacheRoute + @DistLock: one handler call in all', async () => {
      const apps2 = [await start([ReportController]), await start([ReportController])];
      const replies = Promise.all(
        apps2.flatMap((app) => Array.from({ length: 50 }, () => get(app.url, '/report'))),
      );
      // Both apps are in the flow: one holds the lock (its handler waits at the gate), the other
      // waits for that lock.
      await waitFor(
        '100 calls, one handler run and one lock waiter',
        () => {
          const m = apps2.map((app) => metrics(app, 'ReportController.report'));
          return (
            m.every((x) => x?.calls === 50) &&
            runs.report === 1 &&
            m.filter((x) => x.lockWaits > 0).length === 1
          );
        },
        30_000,
      );
      gate.open();
      const all = await replies;
      expect(runs.report).toBe(1);
      expect(all.every((r) => r.status === 200 && r.body.run === 1)).toBe(true);
      expect(all.filter((r) => r.cache === 'miss')).toHaveLength(1);
    });

    it('method decorators alone on a route, with @UseInterceptors(StampedeInterceptor): cached once per request, the controller is not wrapped by StampedeExplorer', async () => {
      const app = await start([DecoratedController]);
      const replies = [];
      for (let i = 0; i < 5; i++) replies.push(await get(app.url, '/decorated'));
      expect(replies.map((r) => r.cache)).toEqual(['miss', 'hit', 'hit', 'hit', 'hit']);
      expect(replies.every((r) => r.body.run === 1)).toBe(true);
      expect(runs.decorated).toBe(1);
      // One flow per request (no second, wrapped flow), named Controller.method.
      expect(Object.keys(app.stampede.metrics())).toEqual(['DecoratedController.value']);
      expect(metrics(app, 'DecoratedController.value')).toMatchObject({ calls: 5, loads: 1 });
      const controller = app.app.get(DecoratedController);
      expect(Object.prototype.hasOwnProperty.call(controller, 'value')).toBe(false);
    });

    it('as a global interceptor (APP_INTERCEPTOR): decorated routes are cached, and a route also bound by @CacheRoute runs one flow per request', async () => {
      const app = await start([GlobalController], { global: true });
      for (let i = 0; i < 3; i++) {
        await get(app.url, '/global/bare');
        await get(app.url, '/global/both');
      }
      expect(runs).toEqual({ 'global.bare': 1, 'global.both': 1 });
      expect(metrics(app, 'GlobalController.bare')).toMatchObject({ calls: 3, hits: 2 });
      expect(metrics(app, 'GlobalController.both')).toMatchObject({ calls: 3, hits: 2 });
    });
  },
);

@Controller('bad')
class BadTtlController {
  @Get()
  @CacheRoute({ ttl: -5 })
  list() {
    return [];
  }
}

@Controller('bad')
class BadVaryController {
  @Get()
  @CacheRoute({ vary: 'accept-language' as unknown as string[] })
  list() {
    return [];
  }
}

@Controller('bad')
class BadResController {
  @Get()
  @CacheRoute()
  list(@Res() res: { send(body: string): void }) {
    res.send('[]');
  }
}

@Controller('bad')
class BadPostController {
  @Post()
  @CacheRoute()
  create() {
    return {};
  }
}

@Controller('bad')
@UseInterceptors(StampedeInterceptor)
class BadJitterController {
  @Get()
  @JitterTtl(2)
  list() {
    return [];
  }
}

describe('HTTP route options are checked at start-up', () => {
  it.each<{ what: string; controller: Type; message: RegExp }>([
    {
      what: 'a negative ttl',
      controller: BadTtlController,
      message: /^BadTtlController\.list: ttl must be a positive duration/,
    },
    {
      what: 'a vary that is not an array',
      controller: BadVaryController,
      message: /^BadVaryController\.list: @CacheRoute on the method: vary must be an array/,
    },
    {
      what: '@Res() without passthrough',
      controller: BadResController,
      message: /^BadResController\.list takes @Res\(\) without passthrough/,
    },
    {
      what: '@CacheRoute on a POST route',
      controller: BadPostController,
      message: /^BadPostController\.create has @CacheRoute but is a POST route/,
    },
    {
      what: '@JitterTtl(2) on a route',
      controller: BadJitterController,
      message: /^BadJitterController\.list: jitter ratio must be in \[0, 1\)/,
    },
  ])(
    '$what: app.init() fails with a StampedeConfigError naming Controller.method',
    async ({ controller, message }) => {
      const moduleRef = await Test.createTestingModule({
        imports: [StampedeModule.forRoot({})],
        controllers: [controller],
      }).compile();
      const app = moduleRef.createNestApplication({ logger: false });
      const init = app.init();
      await expect(init).rejects.toThrow(StampedeConfigError);
      await expect(init).rejects.toThrow(message);
      await app.close();
    },
  );
});
