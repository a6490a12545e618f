import type { DeadLetterCause } from '../dead-letter/dead-letter-entry';

/** Counters of a ServerRedisStreams since it started (`server.metrics()`). */
export interface RedisStreamsServerMetrics {
  /** Entries handed to handlers (each delivery counts). */
  delivered: number;
  /** Entries whose handler succeeded. */
  succeeded: number;
  /** Entry deliveries that failed (the handler threw, or `fail(id)` in a batch). */
  failed: number;
  /** Retries scheduled with backoff. */
  retried: number;
  /** Entries moved to the dead-letter stream. */
  deadLettered: number;
  /** Duplicates skipped and acknowledged, by the layer that caught them. */
  duplicatesSkipped: { memory: number; redis: number };
  /** Entries skipped without acknowledgement because another run held their key. */
  inProgressSkipped: number;
  /**
   * Entries run again after an earlier delivery that ended without a recorded outcome (its
   * consumer crashed or stalled past `idempotency.lockMs`): their effect may have happened twice
   * unless it was made atomic with its done mark (IDEMPOTENT_EFFECT_LUA).
   */
  possibleDuplicates: number;
  /** Batch handler calls. */
  batches: number;
  /** `XACK` commands that succeeded (the batched acknowledgements). */
  xackCalls: number;
  /** Entry ids acknowledged by those commands (`xackIds / xackCalls`: ids per `XACK`). */
  xackIds: number;
  /** Partition leases taken (ordered partitioned streams). */
  partitionsAssigned: number;
  /** Partitions handed over to another consumer, or given up at close(). */
  partitionsReleased: number;
  /** Partition leases lost without a hand-over (not renewed in time). */
  partitionLeasesLost: number;
  /** Acks refused because the partition's lease had moved (the new owner handles those entries). */
  fencedAcks: number;
}

export function emptyServerMetrics(): RedisStreamsServerMetrics {
  return {
    delivered: 0,
    succeeded: 0,
    failed: 0,
    retried: 0,
    deadLettered: 0,
    duplicatesSkipped: { memory: 0, redis: 0 },
    inProgressSkipped: 0,
    possibleDuplicates: 0,
    batches: 0,
    xackCalls: 0,
    xackIds: 0,
    partitionsAssigned: 0,
    partitionsReleased: 0,
    partitionLeasesLost: 0,
    fencedAcks: 0,
  };
}

/** The counts of one stream, the part of the facts that is exported per stream. */
export interface StreamCounts {
  delivered: number;
  failed: number;
  retried: number;
  /** Entries dead-lettered, by reason. */
  deadLettered: Map<DeadLetterCause, number>;
  duplicatesSkipped: { memory: number; redis: number };
  inProgressSkipped: number;
  xackCalls: number;
  xackIds: number;
  /** XACK commands that failed (each is retried). */
  xackFailures: number;
  /** Scans of the pending entries list. */
  claimRuns: number;
  /** Entries taken over by those scans. */
  claimEntries: number;
  partitionsAssigned: number;
  partitionsReleased: number;
  partitionLeasesLost: number;
}

/**
 * The one record of what a server did: `server.metrics()` sums it, and the OpenTelemetry counters
 * read it when the metrics SDK collects (see ServerTelemetry), so the two cannot disagree and
 * counting costs one addition. Per stream (a partition's stream for partitioned streams), as the
 * OpenTelemetry attributes need; the facts that are not exported per stream are kept as totals.
 */
export class ServerCounters {
  succeeded = 0;
  batches = 0;
  possibleDuplicates = 0;
  fencedAcks = 0;
  private readonly streams = new Map<string, StreamCounts>();

  /** The counts of `stream`, made on first use. */
  of(stream: string): StreamCounts {
    let c = this.streams.get(stream);
    if (!c) this.streams.set(stream, (c = emptyStreamCounts()));
    return c;
  }

  byStream(): ReadonlyMap<string, StreamCounts> {
    return this.streams;
  }

  /** The totals over every stream (`server.metrics()`), a new object. */
  totals(): RedisStreamsServerMetrics {
    const t = emptyServerMetrics();
    t.succeeded = this.succeeded;
    t.batches = this.batches;
    t.possibleDuplicates = this.possibleDuplicates;
    t.fencedAcks = this.fencedAcks;
    for (const c of this.streams.values()) {
      t.delivered += c.delivered;
      t.failed += c.failed;
      t.retried += c.retried;
      for (const n of c.deadLettered.values()) t.deadLettered += n;
      t.duplicatesSkipped.memory += c.duplicatesSkipped.memory;
      t.duplicatesSkipped.redis += c.duplicatesSkipped.redis;
      t.inProgressSkipped += c.inProgressSkipped;
      t.xackCalls += c.xackCalls;
      t.xackIds += c.xackIds;
      t.partitionsAssigned += c.partitionsAssigned;
      t.partitionsReleased += c.partitionsReleased;
      t.partitionLeasesLost += c.partitionLeasesLost;
    }
    return t;
  }
}

function emptyStreamCounts(): StreamCounts {
  return {
    delivered: 0,
    failed: 0,
    retried: 0,
    deadLettered: new Map(),
    duplicatesSkipped: { memory: 0, redis: 0 },
    inProgressSkipped: 0,
    xackCalls: 0,
    xackIds: 0,
    xackFailures: 0,
    claimRuns: 0,
    claimEntries: 0,
    partitionsAssigned: 0,
    partitionsReleased: 0,
    partitionLeasesLost: 0,
  };
}

/** Adds (sign 1) or takes away (sign -1) `from` to the counts of `stream` in `into`. */
export function addStreamCounts(
  into: Map<string, StreamCounts>,
  stream: string,
  from: StreamCounts,
  sign: 1 | -1 = 1,
): void {
  let c = into.get(stream);
  if (!c) into.set(stream, (c = emptyStreamCounts()));
  c.delivered += sign * from.delivered;
  c.failed += sign * from.failed;
  c.retried += sign * from.retried;
  for (const [reason, n] of from.deadLettered)
    c.deadLettered.set(reason, (c.deadLettered.get(reason) ?? 0) + sign * n);
  c.duplicatesSkipped.memory += sign * from.duplicatesSkipped.memory;
  c.duplicatesSkipped.redis += sign * from.duplicatesSkipped.redis;
  c.inProgressSkipped += sign * from.inProgressSkipped;
  c.xackCalls += sign * from.xackCalls;
  c.xackIds += sign * from.xackIds;
  c.xackFailures += sign * from.xackFailures;
  c.claimRuns += sign * from.claimRuns;
  c.claimEntries += sign * from.claimEntries;
  c.partitionsAssigned += sign * from.partitionsAssigned;
  c.partitionsReleased += sign * from.partitionsReleased;
  c.partitionLeasesLost += sign * from.partitionLeasesLost;
}
