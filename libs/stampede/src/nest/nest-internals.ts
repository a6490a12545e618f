/**
 * What this package reads of Nest's own metadata, from paths outside @nestjs/common's and
 * @nestjs/core's main entries: the one file that reaches into them. NestJS 11 and 12 serve these
 * paths with the same values (12 through its `./*` export).
 */
export {
  INTERCEPTORS_METADATA,
  METHOD_METADATA,
  PATH_METADATA,
  RESPONSE_PASSTHROUGH_METADATA,
  ROUTE_ARGS_METADATA,
  SSE_METADATA,
} from '@nestjs/common/constants';
export { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
export type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
