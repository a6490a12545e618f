import type { Logger } from '@nestjs/common';
import type {
  Attributes,
  BatchObservableResult,
  Context,
  Counter,
  Histogram,
  Link,
  Meter,
  ObservableGauge,
  Span,
} from '@opentelemetry/api';
import type { Cluster, Redis } from 'ioredis';
import { AckFlushError, describeError } from '../core/errors';
import type { Headers } from '../core/entry-codec';
import { GroupInfo, readGroupInfo } from '../redis/group-info';
import type { DeadLetterCause } from '../dead-letter/dead-letter-entry';
import type { StreamPartition } from '../partitions/partition-layout';
import { emptyServerMetrics, RedisStreamsServerMetrics } from './server-metrics';
import { loadOtelApi, OtelApi, OtelProbe } from './otel-api';
import { EventEmitterLike, RedisStreamsEventBus } from './redis-streams.telemetry-events';
import * as N from './telemetry.names';
import { parseTraceparent, TRACEPARENT, TRACESTATE } from './trace-context';

/** What `process()` reads of a handler's context: its error, set by the error interceptor. */
interface HandlerOutcome {
  hasError(): boolean;
  getError(): unknown;
}

/** The context of one entry (RedisStreamsContext), as far as telemetry reads it. */
export interface ProcessedEntry extends HandlerOutcome {
  readonly id: string;
  readonly deliveries: number;
  readonly headers: Headers;
}

/** The context of a batch (RedisStreamsBatchContext), as far as telemetry reads it. */
export interface ProcessedBatch extends HandlerOutcome {
  readonly entries: readonly { readonly headers: Headers }[];
  /** The entries the handler failed, by id. */
  readonly failures: ReadonlyMap<string, unknown>;
}

export interface ServerTelemetryOptions {
  group: string;
  consumer: string;
  /** Lag and pending (XINFO GROUPS) are read at most this often, and only when collected. */
  groupInfoIntervalMs: number;
  eventEmitter?: EventEmitterLike;
  logger: Logger;
}

/** Attribute objects of one stream, built once (no allocation per message). */
interface StreamAttributes {
  base: Attributes;
  consumed: Attributes;
  processOne: Attributes;
  processBatch: Attributes;
  settle: Attributes;
  memory: Attributes;
  redis: Attributes;
  reasons: Map<string, Attributes>;
}

interface Instruments {
  meter: Meter;
  consumed: Counter;
  duration: Histogram;
  failed: Counter;
  retried: Counter;
  deadLettered: Counter;
  duplicates: Counter;
  inProgressSkipped: Counter;
  xackCalls: Counter;
  xackFailures: Counter;
  xackIds: Histogram;
  claimRuns: Counter;
  claimEntries: Counter;
  partitionAssignments: Counter;
  partitionReleases: Counter;
  partitionLeaseLosses: Counter;
  inFlight: ObservableGauge;
  pending: ObservableGauge;
  lag: ObservableGauge;
  observe: (result: BatchObservableResult) => Promise<void>;
}

/** What the gauges read from the server. */
export interface ObservedServer {
  streams: readonly string[];
  commands: Redis | Cluster;
  inFlight(stream: string): number;
}

/**
 * Everything a ServerRedisStreams records, from one place: the counters of `server.metrics()`,
 * the OpenTelemetry instruments and spans (when `@opentelemetry/api` is installed and an SDK is
 * registered), and the events of `server.events`. The transport calls one method per fact.
 */
export class ServerTelemetry {
  readonly counters: RedisStreamsServerMetrics = emptyServerMetrics();
  readonly events: RedisStreamsEventBus;
  private readonly api: OtelApi | null;
  private readonly probe: OtelProbe | null;
  /** null: no MeterProvider was registered when the server started (nothing to record). */
  private m: Instruments | null = null;
  private readonly attrs = new Map<string, StreamAttributes>();
  private observed: ObservedServer | null = null;
  private groupInfo: { at: number; byStream: Map<string, GroupInfo> } | null = null;
  private groupInfoRefresh: Promise<void> | null = null;
  /** Streams whose XACK failed, with the consecutive failures. */
  private readonly ackFailures = new Map<string, number>();

  constructor(private readonly options: ServerTelemetryOptions) {
    this.api = loadOtelApi();
    this.probe = this.api ? new OtelProbe(this.api) : null;
    this.events = new RedisStreamsEventBus(options.eventEmitter, (event, err) =>
      options.logger.error(`A listener of "${event}" threw: ${describeError(err)}`),
    );
  }

  /** Creates the instruments (once a MeterProvider is registered) and the gauges' callback. */
  start(server: ObservedServer): void {
    this.observed = server;
    const meter = this.probe?.meter();
    if (!meter || this.m) return;
    const counter = (name: string, description: string, unit = '{message}') =>
      meter.createCounter(name, { description, unit });
    const gauge = (name: string, description: string) =>
      meter.createObservableGauge(name, { description, unit: '{message}' });
    const m: Instruments = {
      meter,
      consumed: counter(
        N.METRIC.consumed,
        'Entries delivered to the handlers (each delivery counts).',
      ),
      duration: meter.createHistogram(N.METRIC.processDuration, {
        description: 'Duration of a handler call (one entry, or one batch).',
        unit: 's',
        advice: { explicitBucketBoundaries: N.DURATION_BUCKETS },
      }),
      failed: counter(N.METRIC.failed, 'Entry deliveries whose handler failed.'),
      retried: counter(N.METRIC.retried, 'Failed entries scheduled for a retry with backoff.'),
      deadLettered: counter(N.METRIC.deadLettered, 'Entries moved to the dead-letter stream.'),
      duplicates: counter(N.METRIC.duplicatesSkipped, 'Duplicates skipped and acknowledged.'),
      inProgressSkipped: counter(
        N.METRIC.inProgressSkipped,
        'Entries left pending because another run held their idempotency key.',
      ),
      xackCalls: counter(N.METRIC.xackCalls, 'XACK commands that succeeded.', '{call}'),
      xackFailures: counter(
        N.METRIC.xackFailures,
        'XACK commands that failed (retried).',
        '{call}',
      ),
      xackIds: meter.createHistogram(N.METRIC.xackIds, {
        description: 'Ids acknowledged per XACK.',
        unit: '{message}',
        advice: { explicitBucketBoundaries: N.XACK_IDS_BUCKETS },
      }),
      claimRuns: counter(
        N.METRIC.claimRuns,
        'Scans of the pending entries list for idle entries.',
        '{run}',
      ),
      claimEntries: counter(N.METRIC.claimEntries, 'Entries taken over from other consumers.'),
      partitionAssignments: counter(
        N.METRIC.partitionAssignments,
        'Partition leases taken by this consumer (ordered partitions).',
        '{partition}',
      ),
      partitionReleases: counter(
        N.METRIC.partitionReleases,
        'Partitions handed over by this consumer (rebalance or shutdown).',
        '{partition}',
      ),
      partitionLeaseLosses: counter(
        N.METRIC.partitionLeaseLosses,
        'Partition leases lost without a hand-over (not renewed in time).',
        '{partition}',
      ),
      inFlight: gauge(N.METRIC.inFlight, 'Entries whose handler runs now.'),
      pending: gauge(
        N.METRIC.groupPending,
        'Entries delivered to the group and not acknowledged (XINFO GROUPS).',
      ),
      lag: gauge(N.METRIC.groupLag, 'Entries not delivered to the group yet (XINFO GROUPS).'),
      observe: (result) => this.observe(result),
    };
    meter.addBatchObservableCallback(m.observe, [m.inFlight, m.pending, m.lag]);
    this.m = m;
  }

  stop(): void {
    if (this.m)
      this.m.meter.removeBatchObservableCallback(this.m.observe, [
        this.m.inFlight,
        this.m.pending,
        this.m.lag,
      ]);
    this.m = null;
    this.observed = null;
  }

  // ------------------------------------------------------------------ facts

  delivered(stream: string, n: number): void {
    this.counters.delivered += n;
    this.m?.consumed.add(n, this.attributes(stream).consumed);
  }

  succeeded(n: number): void {
    this.counters.succeeded += n;
  }

  failed(stream: string, n: number): void {
    this.counters.failed += n;
    this.m?.failed.add(n, this.attributes(stream).base);
  }

  retried(stream: string): void {
    this.counters.retried++;
    this.m?.retried.add(1, this.attributes(stream).base);
  }

  batch(): void {
    this.counters.batches++;
  }

  duplicatesSkipped(stream: string, memory: number, redis: number): void {
    this.counters.duplicatesSkipped.memory += memory;
    this.counters.duplicatesSkipped.redis += redis;
    if (!this.m) return;
    const a = this.attributes(stream);
    if (memory > 0) this.m.duplicates.add(memory, a.memory);
    if (redis > 0) this.m.duplicates.add(redis, a.redis);
  }

  inProgressSkipped(stream: string): void {
    this.counters.inProgressSkipped++;
    this.m?.inProgressSkipped.add(1, this.attributes(stream).base);
  }

  possibleDuplicate(): void {
    this.counters.possibleDuplicates++;
  }

  deadLettered(
    stream: string,
    id: string,
    deliveries: number,
    reason: DeadLetterCause,
    error: unknown,
  ): void {
    this.counters.deadLettered++;
    if (this.m) {
      const a = this.attributes(stream);
      let attrs = a.reasons.get(reason);
      if (!attrs)
        a.reasons.set(reason, (attrs = { ...a.base, [N.ATTR_DEAD_LETTER_REASON]: reason }));
      this.m.deadLettered.add(1, attrs);
    }
    const event = 'redis_streams.message.dead_lettered';
    if (this.events.wants(event))
      this.events.emit(event, { stream, group: this.options.group, id, deliveries, reason, error });
  }

  /** An XACK of `count` ids succeeded. */
  acked(stream: string, count: number): void {
    this.counters.xackCalls++;
    this.counters.xackIds += count;
    if (this.m) {
      const a = this.attributes(stream).settle;
      this.m.xackCalls.add(1, a);
      this.m.xackIds.record(count, a);
    }
    if (this.ackFailures.size === 0) return;
    const failedAttempts = this.ackFailures.get(stream);
    if (failedAttempts === undefined) return;
    this.ackFailures.delete(stream);
    this.events.emit('redis_streams.ack.flush_recovered', {
      stream,
      group: this.options.group,
      count,
      failedAttempts,
    });
  }

  ackFailed(err: AckFlushError): void {
    this.ackFailures.set(err.stream, err.attempt);
    this.m?.xackFailures.add(1, this.attributes(err.stream).settle);
    this.events.emit('redis_streams.ack.flush_failed', {
      stream: err.stream,
      group: this.options.group,
      count: err.ids.length,
      attempt: err.attempt,
      error: err.error,
    });
  }

  /** One scan of the claim loop; `count` entries were taken over from `owners`. */
  claimed(stream: string, count: number, owners: () => string[]): void {
    if (this.m) {
      const a = this.attributes(stream).base;
      this.m.claimRuns.add(1, a);
      if (count > 0) this.m.claimEntries.add(count, a);
    }
    const event = 'redis_streams.claim';
    if (count > 0 && this.events.wants(event))
      this.events.emit(event, {
        stream,
        group: this.options.group,
        consumer: this.options.consumer,
        count,
        from: owners(),
      });
  }

  /** The group was missing on `stream` and this server created it again at `fromId`. */
  groupRecreated(stream: string, fromId: string, fromStartId: boolean): void {
    this.events.emit('redis_streams.group.recreated', {
      stream,
      group: this.options.group,
      consumer: this.options.consumer,
      fromId,
      fromStartId,
    });
  }

  /** This consumer took the lease of `partition` and `takenOver` pending entries. */
  partitionAssigned(partition: StreamPartition, token: string, takenOver: number): void {
    this.counters.partitionsAssigned++;
    this.m?.partitionAssignments.add(1, this.attributes(partition.stream).base);
    this.events.emit('redis_streams.partition.assigned', {
      ...this.partitionBase(partition),
      token,
      takenOver,
    });
  }

  partitionReleased(partition: StreamPartition, reason: 'rebalance' | 'shutdown'): void {
    this.counters.partitionsReleased++;
    this.m?.partitionReleases.add(1, this.attributes(partition.stream).base);
    this.events.emit('redis_streams.partition.released', {
      ...this.partitionBase(partition),
      reason,
    });
  }

  partitionLost(partition: StreamPartition, reason: string): void {
    this.counters.partitionLeasesLost++;
    this.m?.partitionLeaseLosses.add(1, this.attributes(partition.stream).base);
    this.events.emit('redis_streams.partition.lost', { ...this.partitionBase(partition), reason });
  }

  /** `count` acks of `stream` refused: its lease had moved. */
  acksFenced(count: number): void {
    this.counters.fencedAcks += count;
  }

  private partitionBase(partition: StreamPartition) {
    return {
      stream: partition.logicalStream,
      partition: partition.partition,
      partitionStream: partition.stream,
      group: this.options.group,
      consumer: this.options.consumer,
    };
  }

  // ------------------------------------------------------------------ handler calls

  /** Whether `process()` records anything: instruments (a MeterProvider) or spans (a TracerProvider). */
  get recordsCalls(): boolean {
    return this.m !== null || !!this.probe?.activeTracer();
  }

  /**
   * Runs one handler call: measures `messaging.process.duration` and, while a TracerProvider is
   * registered, runs it inside a CONSUMER span `process <stream>`: the producer's span is its
   * parent (one entry), or each entry's producer span is a link (a batch).
   */
  process<T>(
    stream: string,
    batch: boolean,
    ctx: ProcessedEntry | ProcessedBatch,
    run: () => Promise<T>,
  ): Promise<T> {
    const m = this.m;
    const tracer = this.probe?.activeTracer();
    if (!m && !tracer) return run();
    const started = performance.now();
    const a = this.attributes(stream);
    const record = (error: unknown) => {
      if (!m) return;
      const seconds = (performance.now() - started) / 1000;
      const attrs = batch ? a.processBatch : a.processOne;
      m.duration.record(
        seconds,
        error === undefined ? attrs : { ...attrs, [N.ATTR_ERROR_TYPE]: errorType(error) },
      );
    };
    if (!tracer) {
      return run().then(
        (value) => {
          record(undefined);
          return value;
        },
        (err: unknown) => {
          record(ctx.hasError() ? ctx.getError() : err);
          throw err;
        },
      );
    }
    const api = this.api!;
    let parent: Context = api.context.active();
    const attributes: Attributes = {
      ...a.base,
      [N.ATTR_OPERATION_NAME]: 'process',
      [N.ATTR_OPERATION_TYPE]: 'process',
    };
    let links: Link[] | undefined;
    if (batch) {
      const entries = (ctx as ProcessedBatch).entries;
      attributes[N.ATTR_BATCH_COUNT] = entries.length;
      links = [];
      for (const entry of entries) {
        const remote = this.remoteContext(entry.headers);
        if (remote) links.push({ context: remote });
      }
    } else {
      const one = ctx as ProcessedEntry;
      attributes[N.ATTR_MESSAGE_ID] = one.id;
      attributes[N.ATTR_DELIVERIES] = one.deliveries;
      const remote = this.remoteContext(one.headers);
      if (remote) parent = api.trace.setSpanContext(parent, remote);
    }
    const span = tracer.startSpan(
      `process ${stream}`,
      { kind: api.SpanKind.CONSUMER, attributes, links },
      parent,
    );
    return api.context.with(api.trace.setSpan(parent, span), async () => {
      try {
        const value = await run();
        if (batch) {
          const failures = (ctx as ProcessedBatch).failures.size;
          if (failures > 0) span.setAttribute(N.ATTR_BATCH_FAILED, failures);
        }
        record(undefined);
        return value;
      } catch (err) {
        const error = ctx.hasError() ? ctx.getError() : err;
        this.recordError(span, error);
        record(error);
        throw err;
      } finally {
        span.end();
      }
    });
  }

  private recordError(span: Span, error: unknown): void {
    const api = this.api!;
    span.setAttribute(N.ATTR_ERROR_TYPE, errorType(error));
    if (error instanceof Error) span.recordException(error);
    else span.recordException(describeError(error));
    span.setStatus({ code: api.SpanStatusCode.ERROR, message: describeError(error) });
  }

  /** The producer's span context from an entry's `traceparent` / `tracestate` headers. */
  private remoteContext(headers: Headers) {
    const parsed = parseTraceparent(headers[TRACEPARENT]);
    if (!parsed) return undefined;
    const state = headers[TRACESTATE];
    return {
      ...parsed,
      isRemote: true,
      // createTraceState: @opentelemetry/api >= 1.5; older ones drop the state.
      traceState:
        state && typeof this.api!.createTraceState === 'function'
          ? this.api!.createTraceState(state)
          : undefined,
    };
  }

  // ------------------------------------------------------------------ gauges

  private async observe(result: BatchObservableResult): Promise<void> {
    const m = this.m;
    const server = this.observed;
    if (!m || !server) return;
    for (const stream of server.streams)
      result.observe(m.inFlight, server.inFlight(stream), this.attributes(stream).base);
    const fresh =
      this.groupInfo && Date.now() - this.groupInfo.at < this.options.groupInfoIntervalMs;
    if (!fresh) await this.refreshGroupInfo(server);
    for (const [stream, info] of this.groupInfo?.byStream ?? []) {
      const attrs = this.attributes(stream).base;
      result.observe(m.pending, info.pending, attrs);
      if (info.lag !== null) result.observe(m.lag, info.lag, attrs);
    }
  }

  /** One XINFO GROUPS per stream, at most one refresh at a time; failures keep the last values. */
  private refreshGroupInfo(server: ObservedServer): Promise<void> {
    this.groupInfoRefresh ??= (async () => {
      const byStream = new Map<string, GroupInfo>();
      await Promise.all(
        server.streams.map(async (stream) => {
          try {
            const info = await readGroupInfo(server.commands, stream, this.options.group, 1000);
            if (info) byStream.set(stream, info);
          } catch (err) {
            const last = this.groupInfo?.byStream.get(stream);
            if (last) byStream.set(stream, last);
            this.options.logger.debug?.(`XINFO GROUPS ${stream}: ${describeError(err)}`);
          }
        }),
      );
      this.groupInfo = { at: Date.now(), byStream };
    })().finally(() => (this.groupInfoRefresh = null));
    return this.groupInfoRefresh;
  }

  private attributes(stream: string): StreamAttributes {
    let a = this.attrs.get(stream);
    if (a) return a;
    const base: Attributes = {
      [N.ATTR_SYSTEM]: N.SYSTEM,
      [N.ATTR_DESTINATION]: stream,
      [N.ATTR_GROUP]: this.options.group,
    };
    const process: Attributes = {
      ...base,
      [N.ATTR_OPERATION_NAME]: 'process',
      [N.ATTR_OPERATION_TYPE]: 'process',
    };
    a = {
      base,
      consumed: { ...base, [N.ATTR_OPERATION_NAME]: 'receive', [N.ATTR_OPERATION_TYPE]: 'receive' },
      processOne: { ...process, [N.ATTR_BATCH]: false },
      processBatch: { ...process, [N.ATTR_BATCH]: true },
      settle: { ...base, [N.ATTR_OPERATION_NAME]: 'ack', [N.ATTR_OPERATION_TYPE]: 'settle' },
      memory: { ...base, [N.ATTR_LAYER]: 'memory' },
      redis: { ...base, [N.ATTR_LAYER]: 'redis' },
      reasons: new Map(),
    };
    this.attrs.set(stream, a);
    return a;
  }
}

/** `error.type`: the error's class name (low cardinality), or `_OTHER`. */
export function errorType(error: unknown): string {
  if (error instanceof Error) return error.constructor?.name || error.name || 'Error';
  return '_OTHER';
}
