import { Controller, Get, Next, Post, Res, Sse, Type } from '@nestjs/common';
import { StampedeConfigError, StampedeKeyError } from '../core/errors';
import { resolvePolicy } from '../core/policy';
import { CacheRoute } from './route-cache.decorators';
import { compileRoutePlan } from './route-cache.plan';
import { Cacheable, DistLock, SingleFlight, XFetch } from './stampede.decorators';

const resolve = (options: object, where: string) => resolvePolicy(options, 60_000, where);
const plan = (controller: Type, method: string) =>
  compileRoutePlan(controller, method, controller.prototype[method], resolve);
const req = (url: string, headers: Record<string, string> = {}) => ({
  method: 'GET',
  url,
  headers,
});

@Controller('a')
@CacheRoute({ ttl: '10s', jitter: 0.2 })
class ComposedController {
  @Get('one')
  @CacheRoute({ ttl: '30s', vary: ['X-Tenant'] })
  @SingleFlight()
  @DistLock({ ttl: 2000 })
  @XFetch(2)
  one() {}

  @Get('two')
  two() {}

  @Post()
  create() {}

  helper() {}
}

@Controller('b')
class DecoratorsOnlyController {
  @Get()
  @SingleFlight()
  coalesced() {}

  @Get('cached')
  @Cacheable({ ttl: '1m' })
  cached() {}

  @Get('keyed')
  @CacheRoute({ key: (r: { url: string }) => `custom:${r.url.length}` })
  keyed() {}

  @Get('empty')
  @CacheRoute({ key: () => '' })
  empty() {}

  @Get('plain')
  plain() {}
}

describe('compileRoutePlan', () => {
  it('composes @CacheRoute on the class, the method decorators, then @CacheRoute on the method', () => {
    const p = plan(ComposedController, 'one')!;
    expect(p.name).toBe('ComposedController.one');
    expect(p.policy).toEqual({
      cache: true,
      ttl: 30_000,
      cacheNull: true,
      singleFlight: true,
      xfetch: { beta: 2 },
      lock: { ttl: 2000, poll: 2, wait: 4000, autoExtend: false },
      jitter: { ratio: 0.2 },
      grace: 0,
      graceBackoff: 1000,
      l1: true,
    });
    expect(p.keyOf(req('/a/one?z=1&y=2', { 'x-tenant': 't1' }))).toBe(
      'route:GET /a/one?y=2&z=1 x-tenant=t1',
    );
  });

  it('@CacheRoute on the class covers its GET routes only', () => {
    expect(plan(ComposedController, 'two')!.policy).toMatchObject({ cache: true, ttl: 10_000 });
    expect(plan(ComposedController, 'create')).toBeUndefined();
    expect(plan(ComposedController, 'helper')).toBeUndefined();
  });

  it('the method decorators alone: as on a provider (@SingleFlight alone caches nothing)', () => {
    expect(plan(DecoratorsOnlyController, 'coalesced')!.policy).toMatchObject({
      cache: false,
      singleFlight: true,
    });
    expect(plan(DecoratorsOnlyController, 'cached')!.policy).toMatchObject({
      cache: true,
      ttl: 60_000,
    });
    expect(plan(DecoratorsOnlyController, 'plain')).toBeUndefined();
  });

  it('a key function gives the key after route:', () => {
    const p = plan(DecoratorsOnlyController, 'keyed')!;
    expect(p.keyOf(req('/b/keyed'))).toBe('route:custom:8');
    expect(() => plan(DecoratorsOnlyController, 'empty')!.keyOf(req('/b/empty'))).toThrow(
      StampedeKeyError,
    );
  });

  it.each([
    [
      'a stampede decorator on a method that is not a route',
      () => {
        class C {
          @SingleFlight()
          helper() {}
        }
        return plan(C, 'helper');
      },
      /^C\.helper has a stampede decorator but is not a route handler/,
    ],
    [
      '@Cacheable({ key }) on a route',
      () => {
        class C {
          @Get()
          @Cacheable({ key: (id: string) => id })
          list() {}
        }
        return plan(C, 'list');
      },
      /^C\.list: @Cacheable\(\{ key \}\) on a route gets no method arguments/,
    ],
    [
      '@Cacheable({ stampede }) on a route',
      () => {
        class C {
          @Get()
          @Cacheable({ stampede: 'sessions' })
          list() {}
        }
        return plan(C, 'list');
      },
      /^C\.list: routes are cached by the default configuration/,
    ],
    [
      'an unknown option',
      () => {
        class C {
          @Get()
          @CacheRoute({ tll: 5 } as object)
          list() {}
        }
        return plan(C, 'list');
      },
      /^C\.list: @CacheRoute on the method: unknown option\(s\) tll/,
    ],
    [
      'a key that is not a function',
      () => {
        @CacheRoute({ key: 'items' as unknown as () => string })
        class C {
          @Get()
          list() {}
        }
        return plan(C, 'list');
      },
      /^C\.list: @CacheRoute on the controller: key must be a function/,
    ],
    [
      'a vary entry that is not a header name',
      () => {
        class C {
          @Get()
          @CacheRoute({ vary: ['accept language'] })
          list() {}
        }
        return plan(C, 'list');
      },
      /^C\.list: @CacheRoute on the method: vary must be an array of request header names/,
    ],
    [
      '@Next()',
      () => {
        class C {
          @Get()
          @CacheRoute()
          list(@Next() _next: unknown) {}
        }
        return plan(C, 'list');
      },
      /^C\.list takes @Next\(\) without passthrough/,
    ],
    [
      'an @Sse() route',
      () => {
        class C {
          @Sse()
          @CacheRoute()
          events() {}
        }
        return plan(C, 'events');
      },
      /^C\.events is an @Sse\(\) route/,
    ],
  ])('%s: StampedeConfigError naming the method', (_what, compile, message) => {
    expect(compile).toThrow(StampedeConfigError);
    expect(compile).toThrow(message);
  });

  describe('privacy (RFC 9111 shared-cache rules by default)', () => {
    class C {
      @Get('default')
      @CacheRoute()
      byDefault() {}

      @Get('vary')
      @CacheRoute({ vary: ['Authorization'] })
      perCaller() {}

      @Get('public')
      @CacheRoute({ privacy: 'public' })
      shared() {}

      @Get('private')
      @CacheRoute({ privacy: 'private', key: () => 'me' })
      mine() {}
    }
    const headers = (h: Record<string, string>) => (name: string) => h[name];

    it('a request with Authorization or Cookie bypasses the cache unless vary names it or privacy is set', () => {
      const auth = req('/', { authorization: 'Bearer a' });
      const cookie = req('/', { cookie: 'sid=1' });
      expect(plan(C, 'byDefault')!.bypasses(auth)).toBe(true);
      expect(plan(C, 'byDefault')!.bypasses(cookie)).toBe(true);
      expect(plan(C, 'byDefault')!.bypasses(req('/'))).toBe(false);
      expect(plan(C, 'perCaller')!.bypasses(auth)).toBe(false);
      expect(plan(C, 'perCaller')!.bypasses(cookie)).toBe(true);
      for (const m of ['shared', 'mine']) {
        expect(plan(C, m)!.bypasses(auth) || plan(C, m)!.bypasses(cookie)).toBe(false);
      }
    });

    it.each([
      [{}, [true, true, true, true]],
      [{ 'set-cookie': 'sid=1' }, [false, false, true, true]],
      [{ 'cache-control': 'private, max-age=60' }, [false, false, false, true]],
      [{ 'cache-control': 'max-age=60, no-store' }, [false, false, false, false]],
      [{ 'cache-control': 'no-store-ish, privately' }, [true, true, true, true]],
    ])('a response with %p is stored by default, vary, public, private: %p', (h, expected) => {
      const stores = ['byDefault', 'perCaller', 'shared', 'mine'].map((m) =>
        plan(C, m)!.stores(headers(h as Record<string, string>)),
      );
      expect(stores).toEqual(expected);
    });

    it.each([
      [
        "privacy: 'private' without a key or a vary that names the caller",
        { privacy: 'private', vary: ['accept-language'] },
        /^C\.list: @CacheRoute\(\{ privacy: 'private' \}\) needs a key that names the caller/,
      ],
      [
        'an unknown privacy',
        { privacy: 'shared' },
        /^C\.list: @CacheRoute on the method: privacy must be 'public' or 'private'/,
      ],
    ])('%s: StampedeConfigError', (_what, options, message) => {
      class C {
        @Get()
        @CacheRoute(options as object)
        list() {}
      }
      expect(() => plan(C, 'list')).toThrow(message);
    });
  });

  it('@Res({ passthrough: true }) is accepted', () => {
    class C {
      @Get()
      @CacheRoute()
      list(@Res({ passthrough: true }) _res: unknown) {}
    }
    expect(plan(C, 'list')).toBeDefined();
  });
});
