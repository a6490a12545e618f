import { applyDecorators, SetMetadata, UseInterceptors } from '@nestjs/common';
import { STAMPEDE_ROUTE } from './route-cache.constants';
import type { CacheRouteOptions } from './route-cache.options';
import { StampedeInterceptor } from './route-cache.interceptor';

/**
 * Caches the responses of a GET route (on a method), or of every GET route of a controller (on
 * the class), and binds StampedeInterceptor there. Stacks with `@SingleFlight()`, `@XFetch()`,
 * `@DistLock()`, `@JitterTtl()` on the method. Options are checked at start-up.
 */
export function CacheRoute<Req = any>(
  options: CacheRouteOptions<Req> = {},
): ClassDecorator & MethodDecorator {
  return applyDecorators(
    SetMetadata(STAMPEDE_ROUTE, options),
    UseInterceptors(StampedeInterceptor),
  );
}
