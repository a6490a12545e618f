import type {
  Attributes,
  BatchObservableResult,
  Meter,
  ObservableCounter,
} from '@opentelemetry/api';
import { addStreamCounts, ServerCounters, StreamCounts } from './server-metrics';
import { reasonAttributes, StreamAttributes, streamAttributes } from './stream-attributes';
import * as N from './telemetry.names';

/** A server's counters as reported here: counted since `baseline` (a server started again). */
interface Source {
  group: string;
  counts: ServerCounters;
  baseline: Map<string, StreamCounts>;
}

/**
 * The OpenTelemetry counters of every server of one meter, read from their ServerCounters when
 * the metrics SDK collects: nothing is recorded per message. Servers of one process that share a
 * stream and group (as in e2e tests) report one sum, and a server that stops leaves its counts
 * behind, so the exported counters never go down.
 */
export class ObservableServerCounters {
  private readonly sources = new Map<ServerCounters, Source>();
  /** Counts of stopped servers, by group, then stream. */
  private readonly retired = new Map<string, Map<string, StreamCounts>>();
  private readonly attrs = new Map<string, Map<string, StreamAttributes>>();
  private readonly consumed: ObservableCounter;
  private readonly failed: ObservableCounter;
  private readonly retried: ObservableCounter;
  private readonly deadLettered: ObservableCounter;
  private readonly duplicates: ObservableCounter;
  private readonly inProgressSkipped: ObservableCounter;
  private readonly xackCalls: ObservableCounter;
  private readonly xackFailures: ObservableCounter;
  private readonly claimRuns: ObservableCounter;
  private readonly claimEntries: ObservableCounter;
  private readonly partitionAssignments: ObservableCounter;
  private readonly partitionReleases: ObservableCounter;
  private readonly partitionLeaseLosses: ObservableCounter;

  constructor(meter: Meter) {
    const counter = (name: string, description: string, unit = '{message}') =>
      meter.createObservableCounter(name, { description, unit });
    this.consumed = counter(
      N.METRIC.consumed,
      'Entries delivered to the handlers (each delivery counts).',
    );
    this.failed = counter(N.METRIC.failed, 'Entry deliveries whose handler failed.');
    this.retried = counter(N.METRIC.retried, 'Failed entries scheduled for a retry with backoff.');
    this.deadLettered = counter(N.METRIC.deadLettered, 'Entries moved to the dead-letter stream.');
    this.duplicates = counter(N.METRIC.duplicatesSkipped, 'Duplicates skipped and acknowledged.');
    this.inProgressSkipped = counter(
      N.METRIC.inProgressSkipped,
      'Entries left pending because another run held their idempotency key.',
    );
    this.xackCalls = counter(N.METRIC.xackCalls, 'XACK commands that succeeded.', '{call}');
    this.xackFailures = counter(
      N.METRIC.xackFailures,
      'XACK commands that failed (retried).',
      '{call}',
    );
    this.claimRuns = counter(
      N.METRIC.claimRuns,
      'Scans of the pending entries list for idle entries.',
      '{run}',
    );
    this.claimEntries = counter(N.METRIC.claimEntries, 'Entries taken over from other consumers.');
    this.partitionAssignments = counter(
      N.METRIC.partitionAssignments,
      'Partition leases taken by this consumer (ordered partitions).',
      '{partition}',
    );
    this.partitionReleases = counter(
      N.METRIC.partitionReleases,
      'Partitions handed over by this consumer (rebalance or shutdown).',
      '{partition}',
    );
    this.partitionLeaseLosses = counter(
      N.METRIC.partitionLeaseLosses,
      'Partition leases lost without a hand-over (not renewed in time).',
      '{partition}',
    );
    meter.addBatchObservableCallback(
      (result) => this.observe(result),
      [
        this.consumed,
        this.failed,
        this.retried,
        this.deadLettered,
        this.duplicates,
        this.inProgressSkipped,
        this.xackCalls,
        this.xackFailures,
        this.claimRuns,
        this.claimEntries,
        this.partitionAssignments,
        this.partitionReleases,
        this.partitionLeaseLosses,
      ],
    );
  }

  /** Reports `counts` from now on (what they hold already is not reported again); returns the stop. */
  add(group: string, counts: ServerCounters): () => void {
    if (!this.sources.has(counts)) {
      const baseline = new Map<string, StreamCounts>();
      for (const [stream, c] of counts.byStream()) addStreamCounts(baseline, stream, c);
      this.sources.set(counts, { group, counts, baseline });
    }
    return () => {
      const source = this.sources.get(counts);
      if (!source) return;
      this.sources.delete(counts);
      let retired = this.retired.get(group);
      if (!retired) this.retired.set(group, (retired = new Map()));
      for (const [stream, c] of counts.byStream()) addStreamCounts(retired, stream, c);
      for (const [stream, c] of source.baseline) addStreamCounts(retired, stream, c, -1);
    };
  }

  private observe(result: BatchObservableResult): void {
    for (const [group, byStream] of this.totals())
      for (const [stream, c] of byStream) this.observeStream(result, group, stream, c);
  }

  private observeStream(
    result: BatchObservableResult,
    group: string,
    stream: string,
    c: StreamCounts,
  ): void {
    const a = this.attributes(group, stream);
    // Only what happened: a counter that was never added to has no point for the stream.
    const put = (instrument: ObservableCounter, value: number, attrs: Attributes) => {
      if (value > 0) result.observe(instrument, value, attrs);
    };
    put(this.consumed, c.delivered, a.consumed);
    put(this.failed, c.failed, a.base);
    put(this.retried, c.retried, a.base);
    for (const [reason, n] of c.deadLettered)
      put(this.deadLettered, n, reasonAttributes(a, reason));
    put(this.duplicates, c.duplicatesSkipped.memory, a.memory);
    put(this.duplicates, c.duplicatesSkipped.redis, a.redis);
    put(this.inProgressSkipped, c.inProgressSkipped, a.base);
    put(this.xackCalls, c.xackCalls, a.settle);
    put(this.xackFailures, c.xackFailures, a.settle);
    put(this.claimRuns, c.claimRuns, a.base);
    put(this.claimEntries, c.claimEntries, a.base);
    put(this.partitionAssignments, c.partitionsAssigned, a.base);
    put(this.partitionReleases, c.partitionsReleased, a.base);
    put(this.partitionLeaseLosses, c.partitionLeasesLost, a.base);
  }

  /** Counts by group and stream: the stopped servers' and the running ones' since they were added. */
  private totals(): Map<string, Map<string, StreamCounts>> {
    const totals = new Map<string, Map<string, StreamCounts>>();
    const of = (group: string) => {
      let byStream = totals.get(group);
      if (!byStream) totals.set(group, (byStream = new Map()));
      return byStream;
    };
    for (const [group, byStream] of this.retired)
      for (const [stream, c] of byStream) addStreamCounts(of(group), stream, c);
    for (const { group, counts, baseline } of this.sources.values()) {
      const into = of(group);
      for (const [stream, c] of counts.byStream()) addStreamCounts(into, stream, c);
      for (const [stream, c] of baseline) addStreamCounts(into, stream, c, -1);
    }
    return totals;
  }

  private attributes(group: string, stream: string): StreamAttributes {
    let byStream = this.attrs.get(group);
    if (!byStream) this.attrs.set(group, (byStream = new Map()));
    let a = byStream.get(stream);
    if (!a) byStream.set(stream, (a = streamAttributes(stream, group)));
    return a;
  }
}

const byMeter = new WeakMap<Meter, ObservableServerCounters>();

/** The counters of `meter`, made once per meter (one set of instruments per MeterProvider). */
export function observableServerCountersOf(meter: Meter): ObservableServerCounters {
  let counters = byMeter.get(meter);
  if (!counters) byMeter.set(meter, (counters = new ObservableServerCounters(meter)));
  return counters;
}
