import { Injectable, Optional } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { HealthIndicatorResult, HealthIndicatorService } from '@nestjs/terminus';
import type { Cluster, Redis } from 'ioredis';
import { describeError } from '../core/errors';
import { partitionStreams } from '../partitions/partition-layout';
import { readGroupStats, StreamGroupStats } from '../partitions/partition-stats';
import { ServerRedisStreams } from '../transport/server-redis-streams';
import { reportWarnings, streamHealthVerdict } from './health-status';

/** Bounds and timeout, the same in both forms. */
interface HealthBounds {
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

/** The explicit form: one stream and one group, through the given connection. */
export interface RedisStreamsHealthOptions extends HealthBounds {
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
}

/**
 * The short form: every stream a server reads, in its group, through its command connection.
 * `maxLag` and `maxPending` apply to each stream (summed over its partitions).
 */
export interface RedisStreamsServerHealthOptions extends HealthBounds {
  /**
   * The server to check. Default: the app's `ServerRedisStreams` provider (the one
   * `RedisStreamsServerModule` provides, or your own provider of that class).
   */
  server?: ServerRedisStreams;
}

const NO_SERVER =
  'No ServerRedisStreams in this app: import RedisStreamsServerModule.forRoot() or forRootAsync() ' +
  '(or provide ServerRedisStreams), pass { server }, or check one stream with { client, stream, group }.';

/**
 * Terminus indicator: connection status, group lag and pending count from `XINFO GROUPS`; with a
 * server, also `groupRecreated` after the server recreated a lost consumer group.
 *
 * `isHealthy(key)` checks every stream the app's `ServerRedisStreams` reads, in its group;
 * `isHealthy(key, { client, stream, group })` checks one stream of any group. Down above
 * `maxLag` / `maxPending`; degraded above `warnLag` / `warnPending` (terminus 12; on terminus 11
 * up, with a `warning` detail).
 */
@Injectable()
export class RedisStreamsHealthIndicator {
  private appServer: ServerRedisStreams | undefined;

  constructor(
    private readonly healthIndicatorService: HealthIndicatorService,
    @Optional() private readonly moduleRef?: ModuleRef,
  ) {}

  /** One stream (or the partitions of a logical stream) and one group. */
  isHealthy<const Key extends string>(
    key: Key,
    options: RedisStreamsHealthOptions,
  ): Promise<HealthIndicatorResult<Key>>;
  /** Every stream the server reads (default: the app's ServerRedisStreams), in its group. */
  isHealthy<const Key extends string>(
    key: Key,
    options?: RedisStreamsServerHealthOptions,
  ): Promise<HealthIndicatorResult<Key>>;
  async isHealthy<const Key extends string>(
    key: Key,
    options: RedisStreamsHealthOptions | RedisStreamsServerHealthOptions = {},
  ): Promise<HealthIndicatorResult<Key>> {
    const explicit = options as Partial<RedisStreamsHealthOptions>;
    if (
      explicit.client !== undefined ||
      explicit.stream !== undefined ||
      explicit.group !== undefined
    )
      return this.checkStream(key, options as RedisStreamsHealthOptions);
    return this.checkServer(key, options as RedisStreamsServerHealthOptions);
  }

  private async checkStream<const Key extends string>(
    key: Key,
    options: RedisStreamsHealthOptions,
  ): Promise<HealthIndicatorResult<Key>> {
    const indicator = this.healthIndicatorService.check(key);
    const { stream, group } = options;
    if (typeof stream !== 'string' || typeof group !== 'string' || !options.client)
      return indicator.down({
        stream,
        group,
        message:
          "Give client, stream and group together; or none of them, to check every stream of the app's ServerRedisStreams.",
      });
    const server = options.client instanceof ServerRedisStreams ? options.client : undefined;
    let client: Redis | Cluster;
    try {
      client = server ? commandClientOf(server) : (options.client as Redis);
    } catch (err) {
      return indicator.down({ stream, group, message: describeError(err) });
    }
    if (client.status !== 'ready')
      return indicator.down({ stream, group, message: `Redis connection is ${client.status}` });
    try {
      const streams = server
        ? server.partitionStreams(stream)
        : options.partitions === undefined
          ? [stream]
          : partitionStreams(stream, options.partitions);
      const [stats] = await withTimeout(
        [readGroupStats(client, stream, streams, group)],
        options.timeoutMs,
      );
      const missing = missingGroup(stats);
      if (missing) return indicator.down({ stream, group, message: missing });
      const { stream: _stream, ...rest } = streamDetails(stats, server);
      const details: Record<string, unknown> = { stream, group, ...rest };
      const verdict = streamHealthVerdict(stats, options);
      if (verdict.status === 'down')
        return indicator.down({
          ...details,
          message: [...verdict.problems, ...verdict.warnings].join(', '),
        });
      return reportWarnings<HealthIndicatorResult<Key>>(indicator, details, verdict.warnings);
    } catch (err) {
      return indicator.down({ stream, group, message: describeError(err) });
    }
  }

  private async checkServer<const Key extends string>(
    key: Key,
    options: RedisStreamsServerHealthOptions,
  ): Promise<HealthIndicatorResult<Key>> {
    const indicator = this.healthIndicatorService.check(key);
    const server = options.server ?? this.findAppServer();
    if (!server) return indicator.down({ message: NO_SERVER });
    const { group } = server.options;
    let client: Redis | Cluster;
    try {
      client = commandClientOf(server);
    } catch (err) {
      return indicator.down({ group, message: describeError(err) });
    }
    if (client.status !== 'ready')
      return indicator.down({ group, message: `Redis connection is ${client.status}` });
    const logical = server.streams;
    if (logical.length === 0)
      return indicator.down({
        group,
        message:
          'ServerRedisStreams reads no stream: no @EventPattern or @MessagePattern handler is registered on it.',
      });
    try {
      const all = await withTimeout(
        logical.map((stream) =>
          readGroupStats(client, stream, server.partitionStreams(stream), group),
        ),
        options.timeoutMs,
      );
      for (const stats of all) {
        const missing = missingGroup(stats);
        if (missing) return indicator.down({ group, message: missing });
      }
      let lag: number | null = 0;
      for (const s of all) lag = lag === null || s.lag === null ? null : lag + s.lag;
      const details: Record<string, unknown> = {
        group,
        pending: all.reduce((sum, s) => sum + s.pending, 0),
        lag,
        streams: all.map((stats) => streamDetails(stats, server)),
      };
      const verdicts = all.map((stats) => ({
        stats,
        verdict: streamHealthVerdict(stats, options),
      }));
      const problems = verdicts.flatMap(({ stats, verdict }) =>
        verdict.problems.map((p) => `${stats.stream}: ${p}`),
      );
      const warnings = verdicts.flatMap(({ stats, verdict }) =>
        verdict.warnings.map((w) => `${stats.stream}: ${w}`),
      );
      if (problems.length > 0)
        return indicator.down({ ...details, message: [...problems, ...warnings].join('; ') });
      return reportWarnings<HealthIndicatorResult<Key>>(indicator, details, warnings);
    } catch (err) {
      return indicator.down({ group, message: describeError(err) });
    }
  }

  /** The app's ServerRedisStreams, looked up app-wide (the module that provides it need not be global). */
  private findAppServer(): ServerRedisStreams | undefined {
    if (this.appServer || !this.moduleRef) return this.appServer;
    try {
      const found: unknown = this.moduleRef.get(ServerRedisStreams, { strict: false });
      if (found instanceof ServerRedisStreams) this.appServer = found;
    } catch {
      // none registered
    }
    return this.appServer;
  }
}

function commandClientOf(server: ServerRedisStreams): Redis | Cluster {
  return server.unwrap<[Redis | Cluster, Redis | Cluster]>()[1];
}

/** Resolves with the results, or rejects when Redis has not answered within `timeoutMs`. */
async function withTimeout<T>(work: Promise<T>[], timeoutMs = 1000): Promise<T[]> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      Promise.all(work),
      new Promise<never>(
        (_, reject) =>
          (timer = setTimeout(
            () => reject(new Error(`Redis did not answer within ${timeoutMs} ms`)),
            timeoutMs,
          )),
      ),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function missingGroup(stats: StreamGroupStats): string | undefined {
  const missing = stats.partitions.find((p) => !p.exists);
  return missing
    ? `Consumer group "${stats.group}" does not exist on stream "${missing.stream}"`
    : undefined;
}

/**
 * What is reported of one stream: its numbers, each partition's for a partitioned one, and with
 * a server, its last recreation of the lost group (reported, not down: the group works again;
 * alerts come from the event and the warning).
 */
function streamDetails(
  stats: StreamGroupStats,
  server: ServerRedisStreams | undefined,
): Record<string, unknown> & { stream: string } {
  const { stream, consumers, pending, lag, partitions } = stats;
  const details: Record<string, unknown> & { stream: string } =
    partitions.length === 1 && partitions[0].stream === stream
      ? { stream, consumers, pending, lag, lastDeliveredId: partitions[0].lastDeliveredId }
      : {
          stream,
          consumers,
          pending,
          lag,
          partitions: partitions.map((p) => ({
            partition: p.partition,
            stream: p.stream,
            consumers: p.consumers,
            pending: p.pending,
            lag: p.lag,
            lastDeliveredId: p.lastDeliveredId,
          })),
        };
  // Ordered partitions: the ones this server owns (and so reads) now.
  if (server?.options.partitions.has(stream) && server.options.ordering === 'key')
    details.owned = server.ownedPartitions(stream);
  const recreated = server?.groupRecreation(stream);
  if (recreated)
    details.groupRecreated = {
      stream: recreated.stream,
      fromId: recreated.fromId,
      fromStartId: recreated.fromStartId,
      at: recreated.at.toISOString(),
      count: recreated.count,
    };
  return details;
}
