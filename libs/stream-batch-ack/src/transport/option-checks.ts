import { DEFAULT_REPLY_PREFIX } from '../core/entry-codec';
import { StreamBatchAckConfigError } from '../core/errors';
import {
  checkNonEmptyString,
  checkNumberAtLeast,
  checkOptionNames as checkNames,
  checkWholeNumber,
  isPlainObject,
  isRedisClient,
  type OptionNames,
  type OptionTree,
} from '@nest-redis-resilience/common';
import type { PartitionsOption } from '../partitions/partition-layout';
import { isClusterConnection, type RedisStreamsClusterConnection } from '../redis/connection';

/** The checks that the server's and the client's options share. */

export type { OptionNames, OptionTree };

function fail(option: string, reason: string): never {
  throw new StreamBatchAckConfigError(option, reason);
}

/** For the value checkers of @nest-redis-resilience/common, whose reasons have no final stop. */
export function failValue(option: string, reason: string): never {
  throw new StreamBatchAckConfigError(option, `${reason}.`);
}

const CLUSTER_CONNECTION: OptionNames<RedisStreamsClusterConnection> = {
  cluster: true,
  clusterOptions: true,
};
const PARTITION: OptionNames<Extract<PartitionsOption[string], object>> = { count: true };

/**
 * Refuses an option name that `tree` does not list, at every level it lists, naming the option
 * and the nearest valid name. Values that are not plain objects are left to the value checks.
 */
export function checkOptionNames(
  owner: 'ServerRedisStreams' | 'ClientRedisStreams',
  options: object,
  tree: OptionTree,
): void {
  checkNames(owner, options, tree, fail);
  const { connection, partitions } = options as { connection?: unknown; partitions?: unknown };
  if (isPlainObject(connection) && isClusterConnection(connection))
    checkNames(owner, connection, CLUSTER_CONNECTION, fail, 'connection.');
  if (isPlainObject(partitions))
    for (const [stream, spec] of Object.entries(partitions))
      if (isPlainObject(spec)) checkNames(owner, spec, PARTITION, fail, `partitions.${stream}.`);
}

const REPLY_PREFIX = (got: string) =>
  `must be a non-empty string without "{" or "}" (a reply stream is <replyPrefix>{<uuid>}, the uuid being its Cluster hash tag), got ${got}`;

export function replyPrefix(value: string | undefined): string {
  if (value === undefined) return DEFAULT_REPLY_PREFIX;
  checkNonEmptyString('replyPrefix', value, failValue, REPLY_PREFIX);
  if (/[{}]/.test(value)) failValue('replyPrefix', REPLY_PREFIX(JSON.stringify(value)));
  return value;
}

export function checkConnection(connection: unknown): void {
  if (typeof connection === 'string') {
    // The URL is quoted without its user info: error messages end up in logs.
    const shown = connection.replace(/\/\/[^\s/?#]*@/, '//***@');
    if (!/^rediss?:\/\//.test(connection))
      throw new StreamBatchAckConfigError(
        'connection',
        `expected a redis:// or rediss:// URL, got "${shown}".`,
      );
    if (!URL.canParse(connection))
      throw new StreamBatchAckConfigError(
        'connection',
        `"${shown}" is not a valid URL (check the host and that the port is 0-65535).`,
      );
    return;
  }
  if (!connection || typeof connection !== 'object')
    throw new StreamBatchAckConfigError(
      'connection',
      'give a redis:// URL, ioredis options, { cluster: [{ host, port }, ...] }, or an ioredis client.',
    );
  if (isRedisClient(connection)) return;
  if (isClusterConnection(connection) && connection.cluster.length === 0)
    throw new StreamBatchAckConfigError('connection.cluster', 'list at least one node.');
}

export function num(
  name: string,
  value: number | undefined,
  fallback: number,
  min: number,
): number {
  if (value === undefined) return fallback;
  checkNumberAtLeast(name, value, min, failValue);
  return value;
}

export function int(
  name: string,
  value: number | undefined,
  fallback: number,
  min: number,
): number {
  const n = num(name, value, fallback, min);
  checkWholeNumber(name, n, failValue);
  return n;
}
