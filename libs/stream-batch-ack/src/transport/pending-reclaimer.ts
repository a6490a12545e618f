import type { Logger } from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import { backoffDelay } from '../core/backoff';
import type { BackoffOptions } from '../core/backoff';
import { describeError } from '../core/errors';
import type { FlowGate } from '../core/flow-gate';
import type { RawEntry } from './stream-reader';

/** An entry handed to the handlers, with its delivery count (1 = first delivery). */
export interface DeliveredEntry {
  id: string;
  fields: string[];
  deliveries: number;
  /** Its partition key, once looked up (null: none), for partitions whose order is kept. */
  key?: string | null;
}

export interface PendingReclaimerOptions {
  group: string;
  consumer: string;
  claim: { minIdleMs: number; intervalMs: number; count: number };
  retry: BackoffOptions;
}

export interface ReclaimerCallbacks {
  /** True while the entry is being handled or waits for its XACK here. */
  isBusy(stream: string, id: string): boolean;
  deliver(stream: string, entries: DeliveredEntry[]): void;
  /** An entry deleted from the stream while pending: nothing to handle, acknowledge it. */
  acknowledge(stream: string, id: string): void;
  /**
   * Whether this consumer may claim entries of `stream` now (default: always). A partition whose
   * order is kept is claimed only by its owner.
   */
  claimable?(stream: string): boolean;
  /** After each scan: `count` entries were taken over, from the consumers `owners()` lists. */
  claimed?(stream: string, count: number, owners: () => string[]): void;
}

interface Retry {
  stream: string;
  id: string;
  deliveries: number;
  delayMs: number;
  due: number;
}

/**
 * The pending entries list is the source of truth for everything not acknowledged:
 * - failed entries of this consumer are taken again with `XCLAIM` after an exponential backoff
 *   (which also counts the delivery); if this process dies first, they stay pending;
 * - entries of dead consumers (idle longer than `claim.minIdleMs`) are taken over every
 *   `claim.intervalMs` (XPENDING IDLE, then XCLAIM of those not handled here already).
 */
export class PendingReclaimer {
  private readonly cursors = new Map<string, string>();
  private readonly retries = new Map<string, Retry>();
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private retryTimerDue = Infinity;
  private loop: Promise<void> | null = null;
  private readonly firing = new Set<Promise<void>>();

  constructor(
    private readonly commands: Redis | Cluster,
    private readonly options: PendingReclaimerOptions,
    private readonly gate: FlowGate,
    private readonly callbacks: ReclaimerCallbacks,
    private readonly logger: Logger,
    private readonly random: () => number = Math.random,
  ) {}

  /** Failed entries waiting for their retry. */
  get waiting(): number {
    return this.retries.size;
  }

  isWaiting(stream: string, id: string): boolean {
    return this.retries.has(`${stream}\u0000${id}`);
  }

  start(streams: readonly string[]): void {
    this.loop = this.runClaimLoop(streams);
  }

  async stop(): Promise<void> {
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    // What waits for a retry stays pending in Redis: the next start (or another consumer) takes it.
    this.retries.clear();
    await Promise.allSettled([this.loop, ...this.firing]);
  }

  /** Drops the retries waiting on `stream` (its entries stay pending in Redis, for its next owner). */
  forget(stream: string): void {
    for (const [key, retry] of this.retries) if (retry.stream === stream) this.retries.delete(key);
  }

  /**
   * Schedules the next delivery of an entry whose delivery `deliveries` failed (after the backoff
   * delay), or was skipped (after `delayMs`); returns the delay.
   */
  scheduleRetry(stream: string, id: string, deliveries: number, delayMs?: number): number {
    delayMs ??= backoffDelay(deliveries, this.options.retry, this.random);
    const due = Date.now() + delayMs;
    this.retries.set(`${stream}\u0000${id}`, { stream, id, deliveries, delayMs, due });
    if (due < this.retryTimerDue) this.armRetryTimer(due);
    return delayMs;
  }

  private armRetryTimer(due: number): void {
    clearTimeout(this.retryTimer);
    this.retryTimerDue = due;
    this.retryTimer = setTimeout(() => this.fireRetries(), Math.max(0, due - Date.now()));
  }

  private fireRetries(): void {
    this.retryTimer = undefined;
    this.retryTimerDue = Infinity;
    if (this.gate.isClosed) return;
    const now = Date.now();
    const dueByStream = new Map<string, Retry[]>();
    let next = Infinity;
    for (const [key, retry] of this.retries) {
      if (retry.due <= now) {
        this.retries.delete(key);
        const list = dueByStream.get(retry.stream);
        if (list) list.push(retry);
        else dueByStream.set(retry.stream, [retry]);
      } else if (retry.due < next) next = retry.due;
    }
    if (next < Infinity) this.armRetryTimer(next);
    for (const [stream, due] of dueByStream) {
      const run = this.claimForRetry(stream, due)
        .catch((err) => {
          if (this.gate.isClosed) return;
          // Still pending in Redis: the claim loop takes them after claim.minIdleMs.
          this.logger.error(`XCLAIM for retry on "${stream}" failed: ${describeError(err)}`);
        })
        .finally(() => this.firing.delete(run));
      this.firing.add(run);
    }
  }

  /**
   * XCLAIM with a minimum idle time of the shortest delay: an entry that another consumer took
   * over in the meantime has been idle for less, and is left to it.
   */
  private async claimForRetry(stream: string, due: Retry[]): Promise<void> {
    if (this.callbacks.claimable?.(stream) === false) return;
    const minIdle = Math.min(...due.map((r) => r.delayMs));
    const reply = (await this.commands.call(
      'XCLAIM',
      stream,
      this.options.group,
      this.options.consumer,
      minIdle,
      ...due.map((r) => r.id),
    )) as RawEntry[];
    const previous = new Map(due.map((r) => [r.id, r.deliveries]));
    const entries: DeliveredEntry[] = [];
    for (const [id, fields] of reply) {
      if (fields === null) this.callbacks.acknowledge(stream, id);
      else entries.push({ id, fields, deliveries: (previous.get(id) ?? 0) + 1 });
    }
    if (entries.length > 0 && !this.gate.isClosed) this.callbacks.deliver(stream, entries);
  }

  /**
   * Every `claim.intervalMs`, one round over the streams. While a round leaves a backlog (a full
   * page was claimed, so more may be pending), the next round starts as soon as there is room
   * to handle entries: a dead consumer's backlog drains at the speed of the handlers, not one
   * page per interval.
   */
  private async runClaimLoop(streams: readonly string[]): Promise<void> {
    let backlog = false;
    while (!this.gate.isClosed) {
      if (!backlog || this.gate.room() === 0) {
        await this.gate.wait(this.options.claim.intervalMs, backlog);
      }
      backlog = false;
      for (const stream of streams) {
        if (this.gate.isClosed) break;
        if (this.callbacks.claimable?.(stream) === false) continue;
        try {
          if ((await this.claimOnce(stream)) > 0 && this.cursors.has(stream)) backlog = true;
        } catch (err) {
          if (!this.gate.isClosed)
            this.logger.error(`Claiming on "${stream}" failed: ${describeError(err)}`);
        }
      }
    }
  }

  /**
   * Takes over every pending entry of `stream` (a partition this consumer now owns), whoever
   * holds it, in id order, `claim.count` per page as room allows, and hands them on. Returns how
   * many were taken.
   */
  async takeOver(stream: string): Promise<number> {
    const { group, consumer, claim } = this.options;
    let after: string | undefined;
    let taken = 0;
    while (!this.gate.isClosed) {
      while (this.gate.room() === 0 && !this.gate.isClosed) await this.gate.wait(100);
      const count = Math.max(1, Math.min(claim.count, this.gate.room()));
      const rows = (await this.commands.call(
        'XPENDING',
        stream,
        group,
        after ? `(${after}` : '-',
        '+',
        count,
      )) as [id: string, owner: string, idleMs: number, deliveries: number][];
      if (rows.length === 0) break;
      after = rows[rows.length - 1][0];
      const counts = new Map<string, number>();
      for (const [id, , , deliveries] of rows)
        if (!this.callbacks.isBusy(stream, id)) counts.set(id, Number(deliveries));
      if (counts.size > 0) {
        const claimed = (await this.commands.call(
          'XCLAIM',
          stream,
          group,
          consumer,
          0,
          ...counts.keys(),
        )) as RawEntry[];
        const entries: DeliveredEntry[] = [];
        for (const [id, fields] of claimed) {
          if (fields === null) this.callbacks.acknowledge(stream, id);
          else entries.push({ id, fields, deliveries: (counts.get(id) ?? 0) + 1 });
        }
        if (entries.length > 0) this.callbacks.deliver(stream, entries);
        taken += entries.length;
      }
      if (rows.length < count) break;
    }
    return taken;
  }

  /**
   * One round on `stream`: lists entries idle longer than `claim.minIdleMs` (XPENDING IDLE, which
   * counts no delivery), leaves out those this consumer already handles or waits to retry, and
   * takes the others with XCLAIM. Goes through the pending list `claim.count` entries per round.
   */
  async claimOnce(stream: string): Promise<number> {
    const room = this.gate.room();
    if (room === 0) return 0;
    const { group, consumer, claim } = this.options;
    const count = Math.min(claim.count, room);
    const after = this.cursors.get(stream);
    const rows = (await this.commands.call(
      'XPENDING',
      stream,
      group,
      'IDLE',
      claim.minIdleMs,
      after ? `(${after}` : '-',
      '+',
      count,
    )) as [id: string, owner: string, idleMs: number, deliveries: number][];
    if (rows.length < count) this.cursors.delete(stream);
    else this.cursors.set(stream, rows[rows.length - 1][0]);
    const counts = new Map<string, number>();
    for (const [id, , , deliveries] of rows)
      if (!this.callbacks.isBusy(stream, id) && !this.isWaiting(stream, id))
        counts.set(id, Number(deliveries));
    if (counts.size === 0) {
      this.callbacks.claimed?.(stream, 0, () => []);
      return 0;
    }
    const claimed = (await this.commands.call(
      'XCLAIM',
      stream,
      group,
      consumer,
      claim.minIdleMs,
      ...counts.keys(),
    )) as RawEntry[];
    const entries: DeliveredEntry[] = [];
    for (const [id, fields] of claimed) {
      // Deleted from the stream while pending (Redis < 7 returns it with nil fields; 7 drops it).
      if (fields === null) this.callbacks.acknowledge(stream, id);
      else entries.push({ id, fields, deliveries: (counts.get(id) ?? 0) + 1 });
    }
    if (entries.length > 0) this.callbacks.deliver(stream, entries);
    this.callbacks.claimed?.(stream, entries.length, () => ownersOf(rows, entries));
    return entries.length;
  }
}

/** The distinct previous owners of the claimed entries. */
function ownersOf(
  rows: [id: string, owner: string, ...unknown[]][],
  entries: DeliveredEntry[],
): string[] {
  const claimed = new Set(entries.map((e) => e.id));
  return [...new Set(rows.filter(([id]) => claimed.has(id)).map(([, owner]) => owner))];
}
