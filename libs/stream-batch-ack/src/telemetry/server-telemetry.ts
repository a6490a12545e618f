import type { Logger } from '@nestjs/common';
import type {
  Attributes,
  BatchObservableResult,
  Context,
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
import { observableServerCountersOf } from './observable-counters';
import { RedisStreamsServerMetrics, ServerCounters } from './server-metrics';
import { loadOtelApi, OtelApi, OtelProbe } from './otel-api';
import { EventEmitterLike, RedisStreamsEventBus } from './redis-streams.telemetry-events';
import { StreamAttributes, streamAttributes } from './stream-attributes';
import * as N from './telemetry.names';
import { parseTraceparent, TRACEPARENT, TRACESTATE } from './trace-context';

/** What `process()` reads of a handler's context: its error, set by the error interceptor. */
interface HandlerOutcome {
  hasError(): boolean;
  getError(): unknown;
}

/** The context of one entry (RedisStreamsContext), as far as telemetry reads it. */
export interface ProcessedEntry extends HandlerOutcome {
  getId(): string;
  getDeliveries(): number;
  getHeaders(): Headers;
}

/** The context of a batch (RedisStreamsBatchContext), as far as telemetry reads it. */
export interface ProcessedBatch extends HandlerOutcome {
  getEntries(): readonly { readonly headers: Headers }[];
  /** The entries the handler failed, by id. */
  getFailures(): ReadonlyMap<string, unknown>;
}

export interface ServerTelemetryOptions {
  group: string;
  consumer: string;
  /** Lag and pending (XINFO GROUPS) are read at most this often, and only when collected. */
  groupInfoIntervalMs: number;
  eventEmitter?: EventEmitterLike;
  logger: Logger;
}

/** The instruments recorded when a fact happens; the counters are read at collection instead. */
interface Instruments {
  meter: Meter;
  duration: Histogram;
  xackIds: Histogram;
  inFlight: ObservableGauge;
  pending: ObservableGauge;
  lag: ObservableGauge;
  observe: (result: BatchObservableResult) => Promise<void>;
  /** Stops reporting this server's counters. */
  unobserveCounters: () => void;
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
 * registered), and the events of `server.events`. The transport calls one method per fact, which
 * counts it once: the OpenTelemetry counters read those counts when the SDK collects.
 */
export class ServerTelemetry {
  private readonly counts = new ServerCounters();
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
    const gauge = (name: string, description: string) =>
      meter.createObservableGauge(name, { description, unit: '{message}' });
    const m: Instruments = {
      meter,
      duration: meter.createHistogram(N.METRIC.processDuration, {
        description: 'Duration of a handler call (one entry, or one batch).',
        unit: 's',
        advice: { explicitBucketBoundaries: N.DURATION_BUCKETS },
      }),
      xackIds: meter.createHistogram(N.METRIC.xackIds, {
        description: 'Ids acknowledged per XACK.',
        unit: '{message}',
        advice: { explicitBucketBoundaries: N.XACK_IDS_BUCKETS },
      }),
      inFlight: gauge(N.METRIC.inFlight, 'Entries whose handler runs now.'),
      pending: gauge(
        N.METRIC.groupPending,
        'Entries delivered to the group and not acknowledged (XINFO GROUPS).',
      ),
      lag: gauge(N.METRIC.groupLag, 'Entries not delivered to the group yet (XINFO GROUPS).'),
      observe: (result) => this.observe(result),
      unobserveCounters: observableServerCountersOf(meter).add(this.options.group, this.counts),
    };
    meter.addBatchObservableCallback(m.observe, [m.inFlight, m.pending, m.lag]);
    this.m = m;
  }

  stop(): void {
    if (this.m) {
      this.m.meter.removeBatchObservableCallback(this.m.observe, [
        this.m.inFlight,
        this.m.pending,
        this.m.lag,
      ]);
      this.m.unobserveCounters();
    }
    this.m = null;
    this.observed = null;
  }

  // ------------------------------------------------------------------ facts

  /** The counters since the server was created (`server.metrics()`), a new object. */
  metrics(): RedisStreamsServerMetrics {
    return this.counts.totals();
  }

  delivered(stream: string, n: number): void {
    this.counts.of(stream).delivered += n;
  }

  succeeded(n: number): void {
    this.counts.succeeded += n;
  }

  failed(stream: string, n: number): void {
    this.counts.of(stream).failed += n;
  }

  retried(stream: string): void {
    this.counts.of(stream).retried++;
  }

  batch(): void {
    this.counts.batches++;
  }

  duplicatesSkipped(stream: string, memory: number, redis: number): void {
    const skipped = this.counts.of(stream).duplicatesSkipped;
    skipped.memory += memory;
    skipped.redis += redis;
  }

  inProgressSkipped(stream: string): void {
    this.counts.of(stream).inProgressSkipped++;
  }

  possibleDuplicate(): void {
    this.counts.possibleDuplicates++;
  }

  deadLettered(
    stream: string,
    id: string,
    deliveries: number,
    reason: DeadLetterCause,
    error: unknown,
  ): void {
    const byReason = this.counts.of(stream).deadLettered;
    byReason.set(reason, (byReason.get(reason) ?? 0) + 1);
    const event = 'redis_streams.message.dead_lettered';
    if (this.events.wants(event))
      this.events.emit(event, { stream, group: this.options.group, id, deliveries, reason, error });
  }

  /** An XACK of `count` ids succeeded. */
  acked(stream: string, count: number): void {
    const c = this.counts.of(stream);
    c.xackCalls++;
    c.xackIds += count;
    this.m?.xackIds.record(count, this.attributes(stream).settle);
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
    this.counts.of(err.stream).xackFailures++;
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
    const c = this.counts.of(stream);
    c.claimRuns++;
    c.claimEntries += count;
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
    this.counts.of(partition.stream).partitionsAssigned++;
    this.events.emit('redis_streams.partition.assigned', {
      ...this.partitionBase(partition),
      token,
      takenOver,
    });
  }

  partitionReleased(partition: StreamPartition, reason: 'rebalance' | 'shutdown'): void {
    this.counts.of(partition.stream).partitionsReleased++;
    this.events.emit('redis_streams.partition.released', {
      ...this.partitionBase(partition),
      reason,
    });
  }

  partitionLost(partition: StreamPartition, reason: string): void {
    this.counts.of(partition.stream).partitionLeasesLost++;
    this.events.emit('redis_streams.partition.lost', { ...this.partitionBase(partition), reason });
  }

  /** `count` acks of `stream` refused: its lease had moved. */
  acksFenced(count: number): void {
    this.counts.fencedAcks += count;
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
      const entries = (ctx as ProcessedBatch).getEntries();
      attributes[N.ATTR_BATCH_COUNT] = entries.length;
      links = [];
      for (const entry of entries) {
        const remote = this.remoteContext(entry.headers);
        if (remote) links.push({ context: remote });
      }
    } else {
      const one = ctx as ProcessedEntry;
      attributes[N.ATTR_MESSAGE_ID] = one.getId();
      attributes[N.ATTR_DELIVERIES] = one.getDeliveries();
      const remote = this.remoteContext(one.getHeaders());
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
          const failures = (ctx as ProcessedBatch).getFailures().size;
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
    if (!a) this.attrs.set(stream, (a = streamAttributes(stream, this.options.group)));
    return a;
  }
}

/** `error.type`: the error's class name (low cardinality), or `_OTHER`. */
export function errorType(error: unknown): string {
  if (error instanceof Error) return error.constructor?.name || error.name || 'Error';
  return '_OTHER';
}
