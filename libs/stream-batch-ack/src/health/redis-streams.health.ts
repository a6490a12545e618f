import { Injectable } from '@nestjs/common';
import { HealthIndicatorResult, HealthIndicatorService } from '@nestjs/terminus';
import { Redis } from 'ioredis';
import { describeError } from '../core/errors';
import { partitionStreams } from '../partitions/partition-layout';
import { readGroupStats } from '../partitions/partition-stats';
import { ServerRedisStreams } from '../transport/server-redis-streams';
import { reportWarnings, streamHealthVerdict } from './health-status';

export interface RedisStreamsHealthOptions {
  /** A connected ioredis client, or the server (its command connection is used). */
  client: Redis | ServerRedisStreams;
  /** The stream, or the logical stream of a partitioned one (checked on every partition). */
  stream: string;
  group: string;
  /**
   * The partition count of a partitioned `stream`, when `client` is an ioredis client. With the
   * server as `client`, its own `partitions` option is used.
   */
  partitions?: number;
  /** Down when the group's lag (entries not yet delivered; summed over partitions) is above this. Default: no limit. */
  maxLag?: number;
  /** Down when the group's pending count (delivered, not acknowledged; summed over partitions) is above this. Default: no limit. */
  maxPending?: number;
  /**
   * Degraded (terminus 12) when the lag is above this but not above `maxLag`. On terminus 11,
   * which has no degraded status, the check stays up with a `warning` detail. Default: none.
   */
  warnLag?: number;
  /** Degraded (terminus 12) when the pending count is above this but not above `maxPending`; see `warnLag`. */
  warnPending?: number;
  /** Down when Redis does not answer within this many ms. Default 1000. */
  timeoutMs?: number;
}

/**
 * Terminus indicator: connection status, group lag and pending count from `XINFO GROUPS`; with the
 * server as `client`, also `groupRecreated` after the server recreated a lost consumer group.
 * Down above `maxLag` / `maxPending`; degraded above `warnLag` / `warnPending` (terminus 12; on
 * terminus 11 up, with a `warning` detail).
 */
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
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const timeoutMs = options.timeoutMs ?? 1000;
      const server = options.client instanceof ServerRedisStreams ? options.client : undefined;
      const streams = server
        ? server.partitionStreams(stream)
        : options.partitions === undefined
          ? [stream]
          : partitionStreams(stream, options.partitions);
      const stats = await Promise.race([
        readGroupStats(client, stream, streams, group),
        new Promise<never>(
          (_, reject) =>
            (timer = setTimeout(
              () => reject(new Error(`Redis did not answer within ${timeoutMs} ms`)),
              timeoutMs,
            )),
        ),
      ]);
      const missing = stats.partitions.find((p) => !p.exists);
      if (missing)
        return indicator.down({
          stream,
          group,
          message: `Consumer group "${group}" does not exist on stream "${missing.stream}"`,
        });
      const { pending, lag } = stats;
      const details: Record<string, unknown> =
        streams.length === 1 && streams[0] === stream
          ? {
              stream,
              group,
              consumers: stats.consumers,
              pending,
              lag,
              lastDeliveredId: stats.partitions[0].lastDeliveredId,
            }
          : {
              stream,
              group,
              consumers: stats.consumers,
              pending,
              lag,
              partitions: stats.partitions.map((p) => ({
                partition: p.partition,
                stream: p.stream,
                consumers: p.consumers,
                pending: p.pending,
                lag: p.lag,
                lastDeliveredId: p.lastDeliveredId,
              })),
            };
      // Reported, not down: the group works again. Alerts come from the event and the warning.
      const recreated = server?.groupRecreation(stream);
      if (recreated)
        details.groupRecreated = {
          stream: recreated.stream,
          fromId: recreated.fromId,
          fromStartId: recreated.fromStartId,
          at: recreated.at.toISOString(),
          count: recreated.count,
        };
      const verdict = streamHealthVerdict({ pending, lag }, options);
      if (verdict.status === 'down')
        return indicator.down({
          ...details,
          message: [...verdict.problems, ...verdict.warnings].join(', '),
        });
      return reportWarnings<HealthIndicatorResult<Key>>(indicator, details, verdict.warnings);
    } catch (err) {
      return indicator.down({ stream, group, message: describeError(err) });
    } finally {
      clearTimeout(timer);
    }
  }
}
