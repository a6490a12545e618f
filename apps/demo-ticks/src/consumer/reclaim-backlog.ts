import type { Cluster, Redis } from 'ioredis';

/** One consumer of the group, from `XINFO CONSUMERS`. */
export interface ConsumerInfo {
  name: string;
  /** Entries delivered to it and not acknowledged. */
  pending: number;
  /** ms since it last read or claimed. */
  idleMs: number;
}

/** What the claim loop still has to take over. */
export interface ReclaimBacklog {
  /** Pending entries of consumers idle longer than `minIdleMs`. */
  backlog: number;
  /** Those consumers and their pending counts. */
  consumers: Record<string, number>;
}

/** Reads the reply of `XINFO CONSUMERS` (a flat field/value list per consumer). */
export function parseConsumers(reply: unknown[][]): ConsumerInfo[] {
  return reply.map((flat) => {
    const f: Record<string, unknown> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) f[String(flat[i])] = flat[i + 1];
    return { name: String(f.name), pending: Number(f.pending ?? 0), idleMs: Number(f.idle ?? 0) };
  });
}

/**
 * The reclaim backlog: entries pending at consumers that have not read or claimed anything for
 * longer than `minIdleMs` (`CLAIM_MIN_IDLE_MS`): crashed consumers, whose entries the claim loop
 * takes over. A live consumer reads every `READ_BLOCK_MS` at most, so it never counts.
 */
export function reclaimBacklog(consumers: ConsumerInfo[], minIdleMs: number): ReclaimBacklog {
  const idle = consumers.filter((c) => c.pending > 0 && c.idleMs > minIdleMs);
  return {
    backlog: idle.reduce((sum, c) => sum + c.pending, 0),
    consumers: Object.fromEntries(idle.map((c) => [c.name, c.pending])),
  };
}

/**
 * Measures the reclaim backlog of a group (one `XINFO CONSUMERS` per stream: the partitions of a
 * partitioned stream are summed, per consumer).
 */
export async function measureReclaimBacklog(
  redis: Redis | Cluster,
  options: { stream: string | readonly string[]; group: string; minIdleMs: number },
): Promise<ReclaimBacklog> {
  const streams = typeof options.stream === 'string' ? [options.stream] : options.stream;
  const replies = await Promise.all(
    streams.map(
      (stream) => redis.call('XINFO', 'CONSUMERS', stream, options.group) as Promise<unknown[][]>,
    ),
  );
  const byName = new Map<string, ConsumerInfo>();
  for (const c of replies.flatMap(parseConsumers)) {
    const seen = byName.get(c.name);
    if (!seen) byName.set(c.name, { ...c });
    else {
      seen.pending += c.pending;
      seen.idleMs = Math.min(seen.idleMs, c.idleMs);
    }
  }
  return reclaimBacklog([...byName.values()], options.minIdleMs);
}
