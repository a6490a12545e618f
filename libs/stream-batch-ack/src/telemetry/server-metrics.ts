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
