import type { Logger } from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import { Clock, systemClock } from '@nest-redis-resilience/common';
import { describeError } from '../core/errors';
import { assignedPartitions } from './partition-assignment';
import { LeaseScripts, leaseKeys } from './lease-scripts';
import type { StreamPartition } from './partition-layout';

export interface PartitionOwnershipOptions {
  group: string;
  consumer: string;
  leaseMs: number;
}

/** What the server does when a partition comes or goes. */
export interface OwnershipCallbacks {
  /** A partition was just taken: claim its pending entries (in id order) and hand them on. */
  takeOver(partition: StreamPartition): Promise<number>;
  /** Giving a partition up: stop handling it and send its acks (the lease is still held). */
  handOver(partition: StreamPartition): Promise<void>;
  /** The lease ended without a hand-over: forget the partition's entries at once. */
  lost(partition: StreamPartition): void;
  assigned(partition: StreamPartition, token: string, takenOver: number): void;
  released(partition: StreamPartition, reason: 'rebalance' | 'shutdown'): void;
  leaseLost(partition: StreamPartition, reason: string): void;
}

type LeaseState = 'taking-over' | 'reading' | 'handing-over';

interface Lease {
  partition: StreamPartition;
  token: string;
  holder: string;
  /** Local time until which the lease is surely held (see `margin`). */
  validUntil: number;
  state: LeaseState;
}

/**
 * Which partitions of the ordered partitioned streams this consumer owns: each partition has one
 * owner among the group's live consumers, by a lease in Redis (in the partition's slot).
 *
 * Every `leaseMs / 3` the consumer renews its membership (per logical stream), computes the even
 * assignment over the live members (the same on every consumer), renews the leases it keeps,
 * hands over those it should not have (after its running handlers finished and their acks were
 * sent: only then is the lease released), and takes the free ones assigned to it. A dead
 * consumer's leases and membership end after `leaseMs`; its partitions move at the next beat.
 *
 * Fencing: a lease counts as held until `leaseMs - margin` after the renewal was sent, where the
 * margin is longer than a blocking read; after that this consumer neither starts handlers nor
 * reads the partition, before Redis lets any other consumer take it.
 */
export class PartitionOwnership {
  readonly intervalMs: number;
  /** The longest XREADGROUP BLOCK on owned partitions (shorter than the fencing margin). */
  readonly maxBlockMs: number;
  private readonly margin: number;
  private readonly leases = new Map<string, Lease>();
  private timer: unknown;
  private beat: Promise<void> | null = null;
  private stopped = true;
  /** Closing: leases are renewed, none taken or handed over (the server drains everything). */
  private closing = false;
  private readonly failing = new Set<string>();

  constructor(
    private readonly commands: (Redis | Cluster) & LeaseScripts,
    private readonly options: PartitionOwnershipOptions,
    /** Logical stream -> its partitions. */
    private readonly streams: ReadonlyMap<string, StreamPartition[]>,
    private readonly callbacks: OwnershipCallbacks,
    private readonly logger: Logger,
    private readonly clock: Clock = systemClock,
  ) {
    this.intervalMs = Math.max(10, Math.floor(options.leaseMs / 3));
    this.maxBlockMs = Math.max(10, Math.floor(options.leaseMs / 5));
    this.margin = Math.floor(options.leaseMs / 4);
  }

  /** True when `stream` is a partition whose order this consumer keeps (it reads it only while it owns it). */
  manages(stream: string): boolean {
    for (const partitions of this.streams.values())
      if (partitions.some((p) => p.stream === stream)) return true;
    return false;
  }

  /** The partition is held and this consumer may start its handlers. */
  owns(stream: string): boolean {
    const lease = this.leases.get(stream);
    return (
      lease !== undefined && lease.state !== 'handing-over' && this.clock.now() < lease.validUntil
    );
  }

  /** The partition is held and its previous owner's entries were taken over: read new ones. */
  reads(stream: string): boolean {
    return this.owns(stream) && this.leases.get(stream)!.state === 'reading';
  }

  /** `"<consumer>|<token>"` of the lease held on `stream`, for fenced acks. */
  holder(stream: string): string | undefined {
    return this.leases.get(stream)?.holder;
  }

  /** The partition indexes of `logical` this consumer owns now. */
  owned(logical: string): number[] {
    return (this.streams.get(logical) ?? [])
      .filter((p) => this.owns(p.stream))
      .map((p) => p.partition);
  }

  /** From now on only renews the leases held (the server is closing and drains every partition). */
  freeze(): void {
    this.closing = true;
  }

  start(): Promise<void> {
    this.stopped = false;
    return this.runBeat();
  }

  /**
   * Stops the beats and gives every partition up: after `handOver` (the server drained its
   * handlers and acks before), releases the leases and leaves the membership, so the others take
   * the partitions at their next beat instead of after `leaseMs`.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    this.clock.clearTimer(this.timer);
    // With Redis unreachable these would wait for the client's retries: the leases then simply
    // end by themselves, so close() waits for them at most leaseMs.
    let timer: unknown;
    const bound = new Promise<void>(
      (resolve) => (timer = this.clock.setTimer(resolve, this.options.leaseMs)),
    );
    await Promise.race([this.giveUpAll(), bound]);
    this.clock.clearTimer(timer);
  }

  private async giveUpAll(): Promise<void> {
    await this.beat?.catch(() => undefined);
    const held = [...this.leases.values()];
    this.leases.clear();
    await Promise.allSettled([
      ...held.map(async (lease) => {
        await this.commands.sbaRelease(
          leaseKeys.lease(lease.partition.stream, this.options.group),
          lease.holder,
        );
        this.callbacks.released(lease.partition, 'shutdown');
      }),
      ...[...this.streams.keys()].map((logical) =>
        this.commands.sbaMember(
          leaseKeys.members(logical, this.options.group),
          this.options.consumer,
          String(this.options.leaseMs),
          '1',
        ),
      ),
    ]);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.clock.setTimer(() => void this.runBeat(), this.intervalMs);
  }

  private runBeat(): Promise<void> {
    const beat = this.beatOnce()
      .catch((err: unknown) => this.logger.error(`Partition leases: ${describeError(err)}`))
      .finally(() => {
        if (this.beat === beat) this.beat = null;
        this.schedule();
      });
    this.beat = beat;
    return beat;
  }

  private async beatOnce(): Promise<void> {
    await Promise.all(
      [...this.streams].map(async ([logical, partitions]) => {
        try {
          await this.beatStream(logical, partitions);
          if (this.failing.delete(logical))
            this.logger.log(`Partition leases of "${logical}" renewed again.`);
        } catch (err) {
          if (this.failing.has(logical)) return;
          this.failing.add(logical);
          this.logger.error(
            `Partition leases of "${logical}" could not be renewed (${describeError(err)}); ` +
              'its partitions stop being handled here when their leases end.',
          );
        }
      }),
    );
  }

  private async beatStream(logical: string, partitions: StreamPartition[]): Promise<void> {
    const { group, consumer, leaseMs } = this.options;
    const members = await this.commands.sbaMember(
      leaseKeys.members(logical, group),
      consumer,
      String(leaseMs),
      '0',
    );
    if (this.stopped) return;
    const wanted = new Set(assignedPartitions(members, consumer, partitions.length));
    await Promise.all(
      partitions.map(async (partition) => {
        const lease = this.leases.get(partition.stream);
        if (lease) await this.keep(lease, this.closing || wanted.has(partition.partition));
        else if (wanted.has(partition.partition) && !this.closing) await this.take(partition);
      }),
    );
  }

  /** Renews a held lease; starts the hand-over of one this consumer should not have any more. */
  private async keep(lease: Lease, wanted: boolean): Promise<void> {
    const { stream } = lease.partition;
    const sentAt = this.clock.now();
    if (sentAt >= lease.validUntil) {
      // Lapsed here (Redis was slow or unreachable): entries read meanwhile were not handled, so
      // the partition is given up and taken again, which takes its pending entries over in order.
      this.leases.delete(stream);
      this.callbacks.lost(lease.partition);
      this.callbacks.leaseLost(lease.partition, 'not renewed in time');
      await this.commands.sbaRelease(leaseKeys.lease(stream, this.options.group), lease.holder);
      return;
    }
    const [held, holder] = await this.commands.sbaLease(
      leaseKeys.lease(stream, this.options.group),
      leaseKeys.counter(stream, this.options.group),
      this.options.consumer,
      String(this.options.leaseMs),
      lease.token,
    );
    if (this.leases.get(stream) !== lease) return;
    if (held !== 1) {
      this.leases.delete(stream);
      const reason = holder
        ? `taken by ${holder.slice(0, holder.lastIndexOf('|'))}`
        : 'expired before it was renewed';
      this.logger.warn(
        `Lost the lease of partition ${lease.partition.partition} of "${lease.partition.logicalStream}" (${reason}): its entries are left to the new owner.`,
      );
      this.callbacks.lost(lease.partition);
      this.callbacks.leaseLost(lease.partition, reason);
      return;
    }
    lease.validUntil = sentAt + this.options.leaseMs - this.margin;
    if (!wanted && lease.state === 'reading') void this.handOver(lease);
  }

  private async take(partition: StreamPartition): Promise<void> {
    const { stream } = partition;
    const sentAt = this.clock.now();
    const [held, token] = await this.commands.sbaLease(
      leaseKeys.lease(stream, this.options.group),
      leaseKeys.counter(stream, this.options.group),
      this.options.consumer,
      String(this.options.leaseMs),
      '',
    );
    if (held !== 1) return;
    if (this.stopped || this.closing) {
      await this.commands.sbaRelease(
        leaseKeys.lease(stream, this.options.group),
        `${this.options.consumer}|${token}`,
      );
      return;
    }
    const lease: Lease = {
      partition,
      token,
      holder: `${this.options.consumer}|${token}`,
      validUntil: sentAt + this.options.leaseMs - this.margin,
      state: 'taking-over',
    };
    this.leases.set(stream, lease);
    let takenOver = 0;
    try {
      takenOver = await this.callbacks.takeOver(partition);
    } catch (err) {
      // Read anyway: what could not be claimed now is claimed by the claim loop later.
      this.logger.error(
        `Taking over the pending entries of "${stream}" failed: ${describeError(err)}`,
      );
    }
    if (this.leases.get(stream) !== lease) return;
    lease.state = 'reading';
    this.callbacks.assigned(partition, token, takenOver);
  }

  private async handOver(lease: Lease): Promise<void> {
    lease.state = 'handing-over';
    try {
      await this.callbacks.handOver(lease.partition);
    } finally {
      if (this.leases.get(lease.partition.stream) === lease) {
        this.leases.delete(lease.partition.stream);
        await this.commands
          .sbaRelease(leaseKeys.lease(lease.partition.stream, this.options.group), lease.holder)
          .catch((err: unknown) =>
            this.logger.warn(
              `Releasing the lease of "${lease.partition.stream}" failed (${describeError(err)}): it ends in ${this.options.leaseMs} ms.`,
            ),
          );
        this.callbacks.released(lease.partition, 'rebalance');
      }
    }
  }
}
