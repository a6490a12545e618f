import type { Logger } from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import { describeError } from '../core/errors';
import type { StreamScripts } from '../redis/scripts';

/** Ids per script call: a long in-flight list is refreshed in several short scripts. */
const CHUNK = 500;
/** The shortest heartbeat period, whatever `claim.minIdleMs` is. */
const MIN_INTERVAL_MS = 50;

export interface ClaimHeartbeatOptions {
  group: string;
  consumer: string;
  /** `claim.minIdleMs`: the heartbeat runs every third of it. */
  minIdleMs: number;
}

/**
 * Keeps the entries this consumer holds (handlers running, XACK queued) from looking idle, so that
 * another consumer's claim loop only takes over the entries of a consumer that is dead or stalled:
 * every `minIdleMs / 3` (at least 50 ms), one script per stream (`keep-claimed-1`: XCLAIM to
 * itself with JUSTID, of the ids it still owns). One call per stream, not one pipeline: the
 * streams (partitions) may be in different Cluster slots.
 */
export class ClaimHeartbeat {
  readonly intervalMs: number;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stopped = true;
  /** Streams whose last refresh failed (logged once until one succeeds). */
  private readonly failing = new Set<string>();
  /** Ids found owned by another consumer, already logged (per stream, pruned every beat). */
  private readonly reported = new Map<string, Set<string>>();

  constructor(
    private readonly commands: (Redis | Cluster) & StreamScripts,
    private readonly options: ClaimHeartbeatOptions,
    private readonly held: () => Map<string, Set<string>>,
    private readonly logger: Logger,
  ) {
    this.intervalMs = Math.max(MIN_INTERVAL_MS, Math.floor(options.minIdleMs / 3));
  }

  start(): void {
    this.stopped = false;
    this.arm();
  }

  /**
   * Stops the timer. A beat under way is not waited for (with Redis unreachable it could outlast
   * the shutdown): it ends when the connection closes, without a log.
   */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.beat()
        .catch((err) => this.logger.error(`Claim heartbeat failed: ${describeError(err)}`))
        .finally(() => this.arm());
    }, this.intervalMs);
  }

  /** One round: refreshes every held entry that is still this consumer's. */
  async beat(): Promise<void> {
    const held = this.held();
    for (const stream of this.reported.keys()) if (!held.has(stream)) this.reported.delete(stream);
    await Promise.all([...held].map(([stream, ids]) => this.refresh(stream, ids)));
  }

  private async refresh(stream: string, ids: Set<string>): Promise<void> {
    const { group, consumer } = this.options;
    const taken: string[] = [];
    try {
      const replies = await Promise.all(
        chunks([...ids], CHUNK).map((chunk) =>
          this.commands.sbaKeepClaimed(stream, group, consumer, ...chunk),
        ),
      );
      for (const [, lost] of replies) taken.push(...lost);
      this.failing.delete(stream);
    } catch (err) {
      const message = describeError(err);
      // A destroyed group: the read loop recreates it (these entries are pending nowhere now).
      if (this.stopped || message.startsWith('NOGROUP') || this.failing.has(stream)) return;
      this.failing.add(stream);
      this.logger.warn(
        `Keeping ${ids.size} entr${ids.size === 1 ? 'y' : 'ies'} of "${stream}" claimed failed: ${message}. ` +
          `If this lasts longer than claim.minIdleMs (${this.options.minIdleMs} ms), other consumers may take them over and run them again.`,
      );
      return;
    }
    this.report(stream, ids, taken);
  }

  /** Warns once per entry that another consumer took over while it was held here. */
  private report(stream: string, held: Set<string>, taken: string[]): void {
    let seen = this.reported.get(stream);
    if (seen) for (const id of seen) if (!held.has(id)) seen.delete(id);
    const fresh = taken.filter((id) => !seen?.has(id));
    if (fresh.length === 0) return;
    if (!seen) this.reported.set(stream, (seen = new Set()));
    for (const id of fresh) seen.add(id);
    this.logger.warn(
      `${fresh.length} entr${fresh.length === 1 ? 'y' : 'ies'} of "${stream}" handled by this consumer (${this.options.consumer}) ` +
        `were taken over by another one (${fresh.slice(0, 5).join(', ')}${fresh.length > 5 ? ', ...' : ''}): ` +
        `this process stalled longer than claim.minIdleMs (${this.options.minIdleMs} ms), so they may run twice.`,
    );
  }
}

function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
