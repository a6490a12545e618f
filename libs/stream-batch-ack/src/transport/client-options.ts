import { StreamBatchAckConfigError } from '../core/errors';
import { resolvePartitions } from '../partitions/partition-layout';
import { checkFunction } from '@nest-redis-resilience/common';
import {
  checkConnection,
  checkOptionNames,
  failValue,
  int,
  OptionNames,
  replyPrefix,
} from './option-checks';
import { RedisStreamsClientOptions } from './redis-streams.options';

const CLIENT_OPTIONS: OptionNames<RedisStreamsClientOptions> = {
  connection: true,
  maxLen: true,
  trimEvery: true,
  replyTimeoutMs: true,
  replyPrefix: true,
  partitions: true,
  partitionKey: true,
  serializer: true,
  deserializer: true,
};

/** Rejects invalid ClientRedisStreams options with an error that names the option. */
export function checkClientOptions(options: RedisStreamsClientOptions): void {
  if (!options || typeof options !== 'object')
    throw new StreamBatchAckConfigError('options', 'ClientRedisStreams needs an options object.');
  checkOptionNames('ClientRedisStreams', options, CLIENT_OPTIONS);
  checkConnection(options.connection);
  int('maxLen', options.maxLen, 0, 0);
  int('trimEvery', options.trimEvery, 1, 1);
  int('replyTimeoutMs', options.replyTimeoutMs, 1, 1);
  replyPrefix(options.replyPrefix);
  resolvePartitions(options.partitions);
  checkFunction(
    'partitionKey',
    options.partitionKey,
    failValue,
    'must be a function (stream, data) => string | undefined',
  );
}
