import { DEFAULT_REPLY_PREFIX } from '../core/entry-codec';
import { StreamBatchAckConfigError } from '../core/errors';
import { nearestName } from '../core/nearest-name';
import { PartitionsOption } from '../partitions/partition-layout';
import { isClusterConnection, type RedisStreamsClusterConnection } from '../redis/connection';

/** The checks that the server's and the client's options share. */

/**
 * The option names of an options object: `true` for a leaf (or a value not looked into, such as
 * ioredis options), a nested object for a group of options whose names are fixed too. Each level
 * is typed against its options interface, so an option added there must be listed here.
 */
export type OptionTree = { [name: string]: true | OptionTree };
export type OptionNames<T> = Record<keyof Required<T>, true | OptionTree>;

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
  checkNames(owner, options, tree, '');
  const { connection, partitions } = options as { connection?: unknown; partitions?: unknown };
  if (isPlainObject(connection) && isClusterConnection(connection as never))
    checkNames(owner, connection, CLUSTER_CONNECTION, 'connection.');
  if (isPlainObject(partitions))
    for (const [stream, spec] of Object.entries(partitions))
      if (isPlainObject(spec)) checkNames(owner, spec, PARTITION, `partitions.${stream}.`);
}

function checkNames(owner: string, options: object, tree: OptionTree, path: string): void {
  const names = Object.keys(tree);
  for (const [name, value] of Object.entries(options)) {
    const option = `${path}${name}`;
    const sub = tree[name];
    if (sub === undefined) {
      const near = nearestName(name, names);
      throw new StreamBatchAckConfigError(
        option,
        `${owner} has no such option. ` +
          (near !== undefined
            ? `Did you mean "${path}${near}"?`
            : `The options${path ? ` of "${path.slice(0, -1)}"` : ''} are: ${names.join(', ')}.`),
      );
    }
    if (sub !== true && isPlainObject(value)) checkNames(owner, value, sub, `${option}.`);
  }
}

function isPlainObject(value: unknown): value is object {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function replyPrefix(value: string | undefined): string {
  if (value === undefined) return DEFAULT_REPLY_PREFIX;
  if (typeof value !== 'string' || value === '' || /[{}]/.test(value))
    throw new StreamBatchAckConfigError(
      'replyPrefix',
      `must be a non-empty string without "{" or "}" (a reply stream is <replyPrefix>{<uuid>}, the uuid being its Cluster hash tag), got ${JSON.stringify(value) ?? String(value)}.`,
    );
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
      'give a redis:// URL, ioredis options, or { cluster: [{ host, port }, ...] }.',
    );
  if (
    isClusterConnection(connection as never) &&
    (connection as { cluster: unknown[] }).cluster.length === 0
  )
    throw new StreamBatchAckConfigError('connection.cluster', 'list at least one node.');
}

export function num(
  name: string,
  value: number | undefined,
  fallback: number,
  min: number,
): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min)
    throw new StreamBatchAckConfigError(name, `must be a number >= ${min}, got ${String(value)}.`);
  return value;
}

export function int(
  name: string,
  value: number | undefined,
  fallback: number,
  min: number,
): number {
  const n = num(name, value, fallback, min);
  if (!Number.isInteger(n))
    throw new StreamBatchAckConfigError(name, `must be a whole number, got ${n}.`);
  return n;
}
