import { Injectable } from '@nestjs/common';
import { HealthIndicatorResult, HealthIndicatorService } from '@nestjs/terminus';
import { Redis } from 'ioredis';
import { describeError } from '../core/errors';
import { readGroupInfo } from '../redis/group-info';
import { ServerRedisStreams } from '../transport/server-redis-streams';

export interface RedisStreamsHealthOptions {
  /** A connected ioredis client, or the server (its command connection is used). */
  client: Redis | ServerRedisStreams;
  stream: string;
  group: string;
  /** Down when the group's lag (entries not yet delivered) is above this. Default: no limit. */
  maxLag?: number;
  /** Down when the group's pending count (delivered, not acknowledged) is above this. Default: no limit. */
  maxPending?: number;
  /** Down when Redis does not answer within this many ms. Default 1000. */
  timeoutMs?: number;
}

/** Terminus indicator: connection status, group lag and pending count from `XINFO GROUPS`. */
@Injectable()
export class RedisStreamsHealthIndicator {
  constructor(private readonly healthIndicatorService: HealthIndicatorService) {}

  async isHealthy<const Key extends string>(
    key: Key,
    options: RedisStreamsHealthOptions,
  ): Promise<HealthIndicatorResult<Key>> {
    const indicator = this.healthIndicatorService.check(key);
    const { stream, group } = options;
    let client: Redis;
    try {
      client =
        options.client instanceof ServerRedisStreams
          ? options.client.unwrap<[Redis, Redis]>()[1]
          : options.client;
    } catch (err) {
      return indicator.down({ stream, group, message: describeError(err) });
    }
    if (client.status !== 'ready')
      return indicator.down({ stream, group, message: `Redis connection is ${client.status}` });
    try {
      const info = await readGroupInfo(client, stream, group, options.timeoutMs ?? 1000);
      if (!info)
        return indicator.down({
          stream,
          group,
          message: `Consumer group "${group}" does not exist on stream "${stream}"`,
        });
      const { pending, lag } = info;
      const details = {
        stream,
        group,
        consumers: info.consumers,
        pending,
        lag,
        lastDeliveredId: info.lastDeliveredId,
      };
      const problems: string[] = [];
      if (options.maxPending !== undefined && pending > options.maxPending)
        problems.push(`pending ${pending} > ${options.maxPending}`);
      if (options.maxLag !== undefined && lag !== null && lag > options.maxLag)
        problems.push(`lag ${lag} > ${options.maxLag}`);
      if (problems.length > 0) return indicator.down({ ...details, message: problems.join(', ') });
      return indicator.up(details);
    } catch (err) {
      return indicator.down({ stream, group, message: describeError(err) });
    }
  }
}
