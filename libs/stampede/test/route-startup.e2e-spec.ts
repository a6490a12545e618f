import {
  Controller,
  DynamicModule,
  Get,
  INestApplication,
  Module,
  Type,
  UseInterceptors,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import {
  Cacheable,
  CacheRoute,
  SingleFlight,
  StampedeConfigError,
  StampedeInterceptor,
  StampedeModule,
} from '@nest-redis-resilience/stampede';
import { REDIS_URL, uniquePrefix } from './support/redis';

/** Decorators that need StampedeInterceptor on a route, with nothing that binds it. */
@Controller('unbound')
class UnboundController {
  @Get()
  @Cacheable({ ttl: '30s' })
  list() {
    return [];
  }
}

@Controller('unbound-flight')
class UnboundSingleFlightController {
  @Get()
  @SingleFlight()
  list() {
    return [];
  }
}

/** The same decorators, served: bound on the controller, or globally. */
@Controller('bound')
@UseInterceptors(StampedeInterceptor)
class BoundController {
  @Get()
  @Cacheable({ ttl: '30s' })
  list() {
    return [];
  }
}

@Controller('global')
class GloballyServedController {
  @Get()
  @Cacheable({ ttl: '30s' })
  list() {
    return [];
  }
}

/** `@CacheRoute` in a module that neither imports StampedeModule nor sees a global one. */
@Controller('feature')
class FeatureController {
  @Get()
  @CacheRoute({ ttl: '30s' })
  list() {
    return [];
  }
}

@Module({ controllers: [FeatureController] })
class FeatureModule {}

describe.each(['express', 'fastify'] as const)(
  'decorators that cannot work stop the start-up, on %s (real Redis)',
  (platform) => {
    jest.setTimeout(30_000);
    let app: INestApplication | undefined;

    const stampede = (isGlobal = false): DynamicModule =>
      StampedeModule.forRoot({
        redis: REDIS_URL,
        keyPrefix: uniquePrefix(`route-startup-${platform}`),
        isGlobal,
      });

    /** Compiles and initializes an app; the error of either step is the start-up's error. */
    async function init(metadata: {
      imports?: (Type | DynamicModule)[];
      controllers?: Type[];
      providers?: object[];
    }): Promise<void> {
      const moduleRef = await Test.createTestingModule(metadata as never).compile();
      app =
        platform === 'fastify'
          ? moduleRef.createNestApplication(new FastifyAdapter(), { logger: false })
          : moduleRef.createNestApplication({ logger: false });
      await app.init();
    }

    afterEach(async () => {
      await app?.close();
      app = undefined;
    });

    it.each([
      ['@Cacheable', UnboundController],
      ['@SingleFlight()', UnboundSingleFlightController],
    ])(
      '%s on a route without StampedeInterceptor: a StampedeConfigError naming the method and the fix',
      async (_what, controller) => {
        const started = init({ imports: [stampede()], controllers: [controller] });
        await expect(started).rejects.toThrow(StampedeConfigError);
        await expect(started).rejects.toThrow(
          new RegExp(
            `^${controller.name}\\.list has a stampede decorator, but no StampedeInterceptor serves this route` +
              `.*@CacheRoute\\(\\).*@UseInterceptors\\(StampedeInterceptor\\).*APP_INTERCEPTOR`,
          ),
        );
      },
    );

    it('the same decorators with the interceptor bound on the controller or globally start', async () => {
      await init({ imports: [stampede()], controllers: [BoundController] });
      await app!.close();
      await init({
        imports: [stampede()],
        controllers: [GloballyServedController],
        providers: [{ provide: APP_INTERCEPTOR, useClass: StampedeInterceptor }],
      });
    });

    it('@CacheRoute in a module that cannot inject StampedeService: a StampedeConfigError naming the method, the module and the fix', async () => {
      const started = init({ imports: [stampede(), FeatureModule] });
      await expect(started).rejects.toThrow(StampedeConfigError);
      await expect(started).rejects.toThrow(
        /^FeatureController\.list has @CacheRoute, but FeatureModule cannot inject StampedeService: .*isGlobal: true.*import/,
      );
    });

    it('the same module starts when StampedeModule is global', async () => {
      await init({ imports: [stampede(true), FeatureModule] });
    });
  },
);
