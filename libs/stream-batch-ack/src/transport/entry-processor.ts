import type { Logger } from '@nestjs/common';
import type { AckBatcher } from '../core/ack-batcher';
import {
  DecodedEntry,
  decodeEntry,
  Headers,
  partitionKeyOfFields,
  RequestInfo,
} from '../core/entry-codec';
import { describeError, MalformedEntryError, MaxDeliveriesExceededError } from '../core/errors';
import { KeySequencer, SequencedFate } from '../core/key-sequencer';
import { LruCache } from '@nest-redis-resilience/common';
import type { IdempotencyStore } from '../idempotency/idempotency.store';
import type { IdempotentOptions } from '../idempotency/idempotency.options';
import type { StreamPartition } from '../partitions/partition-layout';
import type { DeadLetterCause } from '../dead-letter/dead-letter-entry';
import type { DeadLetterWriter } from '../dead-letter/dead-letter-writer';
import type { FlowGate } from '../core/flow-gate';
import type { DeliveredEntry, PendingReclaimer } from './pending-reclaimer';
import {
  IdempotencyHandle,
  RedisStreamsBatchContext,
  RedisStreamsBatchEntry,
  RedisStreamsContext,
} from './redis-streams.context';
import type { ServerTelemetry } from '../telemetry/server-telemetry';

/** A handler as resolved at start-up from its decorators. */
export interface Route {
  /** The physical stream read (a partition's stream for a partitioned one). */
  stream: string;
  /** The logical stream of a partition (its partitioned stream's name). */
  pattern?: string;
  /** The handler's pattern, when it is not the (logical) stream: the option `streams` maps it. */
  handler?: string;
  /** Set for the partitions of a partitioned stream. */
  partition?: StreamPartition;
  /** `@EventPattern(stream, { batch: true })`: the handler takes the whole read batch. */
  batch: boolean;
  /** `@MessagePattern(stream)`: the handler's result is the reply of a request. */
  replies: boolean;
  /**
   * A partition whose order is kept (`ordering: 'key'`): handled only while this consumer owns
   * it, each key's entries in id order and one at a time.
   */
  ordered?: boolean;
  idempotent?: {
    key?: IdempotentOptions['key'];
    ttlMs: number;
    lockMs: number;
  };
}

export interface ProcessorDeps {
  group: string;
  consumer: string;
  maxDeliveries: number;
  gate: FlowGate;
  batcher: AckBatcher;
  reclaimer: PendingReclaimer;
  deadLetters: DeadLetterWriter;
  idempotency: IdempotencyStore | null;
  /** Counters (`server.metrics()`), OpenTelemetry instruments and events: one call per fact. */
  telemetry: ServerTelemetry;
  logger: Logger;
  /** Runs the Nest handler of `route` (guards, interceptors, pipes) and settles with its result. */
  invoke(
    route: Route,
    payload: unknown,
    ctx: RedisStreamsContext | RedisStreamsBatchContext,
  ): Promise<unknown>;
  /** Turns a decoded message into the handler's payload (Nest's deserializer, maybe asynchronous). */
  deserialize(
    route: Route,
    payload: unknown,
    request: RequestInfo | undefined,
    headers: Headers,
  ): unknown;
  /** The reply namespace: a request to a `@MessagePattern` with a `replyTo` outside it is malformed. */
  replyPrefix: string;
  /** Sends the reply of a request (`@MessagePattern`). */
  reply(request: RequestInfo, result: { response?: unknown; err?: unknown }): Promise<void>;
  /** For ordered partitions: true while this consumer owns the partition and may handle it. */
  owns?(stream: string): boolean;
}

/** How one entry's run ended. */
interface Outcome {
  readonly error?: unknown;
  /** Succeeded, but the handler asked to leave the entry pending. */
  readonly skipAck?: boolean;
  /** A request whose error was sent back to the caller: acknowledged, not retried. */
  readonly answered?: boolean;
  /**
   * Ordered batch: an entry after a failed one of its key. Neither acknowledged nor retried: it
   * runs again after the failed one.
   */
  readonly heldBack?: boolean;
  /** Ordered partition given up before the handler started: left pending for the next owner. */
  readonly notRun?: boolean;
}
const SUCCEEDED: Outcome = Object.freeze({});
const ACK_SKIPPED: Outcome = Object.freeze({ skipAck: true });

/** The error recorded (for the idempotency marks) for an entry held back behind a failed one. */
const HELD_BACK = new Error('held back behind a failed entry of its key');
/** The error recorded (for the idempotency marks) for an entry of a partition given up before it ran. */
const NOT_OWNED = new Error('the partition moved to another consumer before the entry ran');
const NOT_RUN: Outcome = Object.freeze({ error: NOT_OWNED, notRun: true });

/** An entry that decoded well and is about to run. */
interface Job {
  entry: DeliveredEntry;
  decoded: Extract<DecodedEntry, { ok: true }>;
  payload: unknown;
  /** A key of your own (`@Idempotent({ key })`), with the group; undefined under the default key. */
  key?: string;
}

/**
 * What happens to entries between the read and the XACK: decode, dead-letter what cannot run,
 * filter duplicates (a whole batch per round trip), run the handler (once per batch, or once per
 * entry), then acknowledge, retry with backoff, or dead-letter.
 */
export class EntryProcessor {
  /** Ids being handled here, per stream (no key string built per entry). */
  private readonly inFlight = new Map<string, Set<string>>();
  private readonly running = new Set<Promise<void>>();
  /** The last error of entries waiting for a retry: a dead-letter entry names it. */
  private readonly lastErrors = new LruCache<string>({ maxSize: 10_000, ttlMs: 24 * 3600_000 });
  /** Per ordered partition: the order of its keys. */
  private readonly sequencers = new Map<string, KeySequencer<DeliveredEntry>>();

  constructor(private readonly deps: ProcessorDeps) {}

  /** True while the entry is being handled here or waits for its XACK. */
  isBusy(stream: string, id: string): boolean {
    return (this.inFlight.get(stream)?.has(id) ?? false) || this.deps.batcher.has(stream, id);
  }

  /**
   * The ids that this consumer must keep (see ClaimHeartbeat), per stream: those being handled
   * here and those waiting for their XACK (isBusy), but not those waiting for a retry, whose
   * XCLAIM for the retry needs their idle time.
   */
  held(): Map<string, Set<string>> {
    const out = new Map<string, Set<string>>();
    const add = (stream: string, ids: Iterable<string>) => {
      for (const id of ids) {
        if (this.deps.reclaimer.isWaiting(stream, id)) continue;
        let set = out.get(stream);
        if (!set) out.set(stream, (set = new Set()));
        set.add(id);
      }
    };
    for (const [stream, ids] of this.inFlight) add(stream, ids);
    for (const [stream, ids] of this.deps.batcher.queued()) add(stream, ids);
    return out;
  }

  /** Entries of `stream` being handled here now. */
  inFlightOf(stream: string): number {
    return this.inFlight.get(stream)?.size ?? 0;
  }

  get runningCount(): number {
    return this.running.size;
  }

  /** Waits for running handlers, at most `timeoutMs`; resolves with how many are still running. */
  async drain(timeoutMs: number): Promise<number> {
    if (this.running.size === 0) return 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let timedOut = false;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        timedOut = true;
        resolve();
      }, timeoutMs);
    });
    // A run that ends may start the next one of its key (ordered partitions): wait for it too.
    while (this.running.size > 0 && !timedOut)
      await Promise.race([Promise.allSettled([...this.running]), timeout]);
    clearTimeout(timer);
    return this.running.size;
  }

  /** Takes `entries` of `stream` (skipping those already here) and handles them in the background. */
  process(route: Route, entries: DeliveredEntry[]): void {
    const { stream } = route;
    let busy = this.inFlight.get(stream);
    if (!busy) this.inFlight.set(stream, (busy = new Set()));
    const ids = busy;
    const fresh = entries.filter((e) => !ids.has(e.id));
    if (fresh.length === 0) return;
    for (const e of fresh) ids.add(e.id);
    this.deps.gate.take(fresh.length);
    if (!route.ordered) {
      this.deps.telemetry.delivered(stream, fresh.length);
      this.start(route, fresh);
      return;
    }
    // Read or claimed just before this consumer gave the partition up: left pending, to its next
    // owner, which takes the pending entries over first.
    if (!this.deps.owns?.(stream)) {
      this.leave(stream, fresh);
      return;
    }
    this.deps.telemetry.delivered(stream, fresh.length);
    let sequencer = this.sequencers.get(stream);
    if (!sequencer)
      this.sequencers.set(
        stream,
        (sequencer = new KeySequencer<DeliveredEntry>(keyOf, route.batch)),
      );
    const runnable = sequencer.admit(fresh);
    if (runnable.length > 0) this.start(route, runnable, sequencer);
  }

  /**
   * Forgets an ordered partition that this consumer gave up or lost: the entries waiting for
   * their key's turn or for a retry leave (they stay pending in Redis, for the next owner);
   * handlers running now finish (`inFlightOf(stream)` counts them).
   */
  dropPartition(stream: string): void {
    const sequencer = this.sequencers.get(stream);
    this.sequencers.delete(stream);
    this.deps.reclaimer.forget(stream);
    if (sequencer) this.leave(stream, sequencer.drop());
  }

  private start(
    route: Route,
    entries: DeliveredEntry[],
    sequencer?: KeySequencer<DeliveredEntry>,
  ): void {
    const run: Promise<void> = this.handle(route, entries)
      .catch((err: unknown) => {
        this.deps.logger.error(`Entries of "${route.stream}": ${describeError(err)}`);
        return undefined;
      })
      .then((heldBack) => {
        this.running.delete(run);
        if (sequencer) this.next(route, entries, sequencer, heldBack);
        else this.leave(route.stream, entries);
      });
    this.running.add(run);
  }

  /** After a run of an ordered partition: what finished leaves, and the keys it freed go on. */
  private next(
    route: Route,
    ran: DeliveredEntry[],
    sequencer: KeySequencer<DeliveredEntry>,
    heldBack: ReadonlySet<string> | undefined,
  ): void {
    const { stream } = route;
    if (this.sequencers.get(stream) !== sequencer) {
      this.leave(stream, ran); // the partition was dropped meanwhile
      return;
    }
    const fate = (e: DeliveredEntry): SequencedFate =>
      heldBack?.has(e.id) ? 'held' : this.deps.reclaimer.isWaiting(stream, e.id) ? 'retry' : 'done';
    this.leave(stream, heldBack ? ran.filter((e) => !heldBack.has(e.id)) : ran);
    const turn = sequencer.settle(ran, fate);
    if (turn.length === 0) return;
    // Closing, being handed over or lost: what waited stays pending, for the next owner.
    if (!this.deps.gate.isClosed && this.deps.owns?.(stream)) this.start(route, turn, sequencer);
    else this.leave(stream, turn);
  }

  /** Entries that are not handled here any more (done, waiting for a retry, or dropped). */
  private leave(stream: string, entries: readonly DeliveredEntry[]): void {
    if (entries.length === 0) return;
    const ids = this.inFlight.get(stream);
    for (const e of entries) ids?.delete(e.id);
    this.deps.gate.release(entries.length);
  }

  /** Handles entries of one stream; resolves with the ids held back (ordered batches), if any. */
  private async handle(
    route: Route,
    entries: DeliveredEntry[],
  ): Promise<ReadonlySet<string> | undefined> {
    const decoded = await this.admit(route, entries);
    if (decoded.length === 0) return;
    const idem = route.idempotent;
    const store = this.deps.idempotency;
    if (!idem || !store) {
      const jobs = await this.withinDeliveryLimit(route, decoded);
      if (jobs.length === 0) return;
      if (route.batch) {
        const outcomes = await this.runBatch(route, jobs);
        const heldBack = this.holdBack(route, jobs, outcomes);
        await this.settle(route, jobs, outcomes);
        return heldBack;
      }
      // Per-entry handlers without idempotency: each entry is acknowledged as soon as it is done.
      else
        await Promise.all(
          jobs.map((job) =>
            this.runOne(route, job, undefined, (o) => this.settleOne(route, job, o)),
          ),
        );
      return;
    }

    // Checked before the delivery limit: an entry that was handled (done) is acknowledged, and one
    // that another consumer is handling (in progress) is left to it, however often it was delivered.
    const jobs = decoded;
    // The default key is the entry, which the pending entries list gives to one run at a time:
    // no in-progress mark, one done mark per entry (a set per stream and slice of ids).
    const scope = idem.key ? undefined : `${this.deps.group}:${route.stream}`;
    let begun;
    try {
      begun = scope
        ? await store.beginOwned(
            scope,
            jobs.map((j) => j.entry),
          )
        : await store.begin(
            jobs.map((j) => j.key!),
            idem.lockMs,
          );
    } catch (err) {
      this.deps.logger.error(
        `Idempotency check of ${jobs.length} entr${jobs.length === 1 ? 'y' : 'ies'} of "${route.stream}" failed: ${describeError(err)}; retrying them.`,
      );
      await this.settle(
        route,
        jobs,
        jobs.map(() => ({ error: err })),
      );
      return;
    }
    const { token, states, doneInL2, lockLeftMs } = begun;
    const acquired: Job[] = [];
    states.forEach((state, i) => {
      const job = jobs[i];
      if (state === 'done') this.deps.batcher.add(route.stream, job.entry.id);
      else if (state === 'processing') {
        // Not acknowledged: looked at again when the holder's lock ends (or it finished).
        this.deps.telemetry.inProgressSkipped(route.stream);
        const wait = lockLeftMs[i];
        this.deps.reclaimer.scheduleRetry(
          route.stream,
          job.entry.id,
          job.entry.deliveries,
          wait === undefined ? undefined : wait + 50,
        );
      } else {
        acquired.push(job);
        if (
          job.entry.deliveries > 1 &&
          !this.lastErrors.has(`${route.stream}\u0000${job.entry.id}`)
        )
          this.deps.telemetry.possibleDuplicate();
      }
    });
    const done = states.filter((s) => s === 'done').length;
    this.deps.telemetry.duplicatesSkipped(route.stream, done - doneInL2, doneInL2);
    const toRun = await this.withinDeliveryLimit(route, acquired);
    if (toRun.length < acquired.length && !scope) {
      // Dead-lettered: their keys are released, so that a replay runs.
      const gone = acquired.filter((job) => !toRun.includes(job)).map((job) => job.key!);
      await store.finish(token, [], gone).catch(() => undefined);
    }
    if (toRun.length === 0) return;

    const handle = store.hasL2 ? { token, ttlMs: idem.ttlMs } : undefined;
    const recordOf = (job: Job) => store.record(job.key ?? `${scope}:${job.entry.id}`);
    const outcomes = route.batch
      ? await this.runBatch(route, toRun, handle && recordOf, handle)
      : await Promise.all(
          toRun.map((job) =>
            this.runOne(route, job, handle && { ...handle, record: recordOf(job) }),
          ),
        );
    const heldBack = this.holdBack(route, toRun, outcomes);
    const succeeded: string[] = [];
    const failed: string[] = [];
    outcomes.forEach((o, i) => {
      if (o.error !== undefined) failed.push(toRun[i].key!);
      else succeeded.push(scope ? toRun[i].entry.id : toRun[i].key!);
    });
    try {
      if (scope) await store.finishOwned(scope, succeeded, idem.ttlMs);
      else await store.finish(token, succeeded, failed, idem.ttlMs);
    } catch (err) {
      // The entries were handled: they are acknowledged anyway. Keys of your own stay in progress
      // in L2 until lockMs passes (this process remembers them as done in L1).
      this.deps.logger.warn(`Idempotency marks on "${route.stream}" failed: ${describeError(err)}`);
    }
    await this.settle(route, toRun, outcomes);
    return heldBack;
  }

  /**
   * Ordered batches: the entries of a key after its first failed one are held back (not
   * acknowledged, not retried, their idempotency keys forgotten): they run again after it.
   */
  private holdBack(route: Route, jobs: Job[], outcomes: Outcome[]): Set<string> | undefined {
    if (!route.ordered || !route.batch) return undefined;
    let failedKeys: Set<string> | undefined;
    let held: Set<string> | undefined;
    jobs.forEach((job, i) => {
      const key = keyOf(job.entry);
      if (key === undefined) return;
      if (failedKeys?.has(key)) {
        outcomes[i] = { error: HELD_BACK, heldBack: true };
        (held ??= new Set()).add(job.entry.id);
      } else if (outcomes[i].error !== undefined) (failedKeys ??= new Set()).add(key);
    });
    return held;
  }

  /** Dead-letters the entries delivered more than maxDeliveries times (their handler keeps failing or crashing); returns the others. */
  private async withinDeliveryLimit(route: Route, jobs: Job[]): Promise<Job[]> {
    const max = this.deps.maxDeliveries;
    if (jobs.every((job) => job.entry.deliveries <= max)) return jobs;
    const within: Job[] = [];
    const rejected: Promise<void>[] = [];
    for (const job of jobs) {
      const { entry } = job;
      if (entry.deliveries <= max) {
        within.push(job);
        continue;
      }
      const key = `${route.stream}\u0000${entry.id}`;
      const error = new MaxDeliveriesExceededError(
        route.stream,
        entry.id,
        entry.deliveries - 1,
        this.lastErrors.get(key),
      );
      this.deps.logger.warn(error.message);
      rejected.push(
        this.deadLetter(
          route.stream,
          entry,
          job.decoded.fields,
          entry.deliveries - 1,
          'max-deliveries',
          error,
        ),
      );
    }
    await Promise.all(rejected);
    return within;
  }

  /** Decodes the entries and computes their idempotency keys; dead-letters the malformed ones. */
  private async admit(route: Route, entries: DeliveredEntry[]): Promise<Job[]> {
    const jobs: Job[] = [];
    const rejected: Promise<void>[] = [];
    for (const entry of entries) {
      const decoded = decodeEntry(
        entry.fields,
        route.replies ? { replyPrefix: this.deps.replyPrefix } : undefined,
      );
      if (!decoded.ok) {
        const error = new MalformedEntryError(route.stream, entry.id, decoded.error);
        this.deps.logger.warn(error.message);
        rejected.push(
          this.deadLetter(
            route.stream,
            entry,
            decoded.fields,
            entry.deliveries,
            'malformed',
            error,
          ),
        );
        continue;
      }
      let payload: unknown;
      try {
        payload = this.deps.deserialize(route, decoded.payload, decoded.request, decoded.headers);
        if (payload instanceof Promise) payload = await payload;
      } catch (err) {
        // The deserializer refused it: as malformed as bad JSON, and retrying will not help.
        this.deps.logger.warn(
          `Deserializing entry ${entry.id} of "${route.stream}" failed: ${describeError(err)}`,
        );
        rejected.push(
          this.deadLetter(route.stream, entry, decoded.fields, entry.deliveries, 'malformed', err),
        );
        continue;
      }
      const job: Job = { entry, decoded, payload };
      // The default key (the entry) is not built per entry: see handle().
      if (route.idempotent?.key) {
        const ctx = {
          stream: route.stream,
          id: entry.id,
          headers: decoded.headers,
          logicalStream: route.pattern ?? route.stream,
          partition: route.partition?.partition,
        };
        try {
          job.key = `${this.deps.group}:${route.idempotent.key(payload, ctx)}`;
        } catch (err) {
          this.deps.logger.warn(
            `Idempotency key of entry ${entry.id} of "${route.stream}": ${describeError(err)}`,
          );
          rejected.push(
            this.deadLetter(
              route.stream,
              entry,
              decoded.fields,
              entry.deliveries,
              'malformed',
              err,
            ),
          );
          continue;
        }
      }
      jobs.push(job);
    }
    await Promise.all(rejected);
    return jobs;
  }

  private async runBatch(
    route: Route,
    jobs: Job[],
    recordOf?: (job: Job) => string,
    handle?: { token: string; ttlMs: number },
  ): Promise<Outcome[]> {
    if (this.givenUp(route)) return jobs.map(() => NOT_RUN);
    const { group, consumer } = this.deps;
    const entries: RedisStreamsBatchEntry[] = jobs.map((job) => ({
      id: job.entry.id,
      deliveries: job.entry.deliveries,
      headers: job.decoded.headers,
      fields: job.decoded.fields,
      idempotencyRecord: recordOf?.(job),
    }));
    const ctx = new RedisStreamsBatchContext([
      route.stream,
      group,
      consumer,
      entries,
      handle,
      route.partition,
    ]);
    this.deps.telemetry.batch();
    try {
      await this.deps.invoke(
        route,
        jobs.map((j) => j.payload),
        ctx,
      );
    } catch (err) {
      const error = ctx.hasError() ? ctx.getError() : err;
      return jobs.map(() => ({ error: error ?? new Error('batch handler failed') }));
    }
    const failures = ctx.getFailures();
    return jobs.map((job) =>
      failures.has(job.entry.id)
        ? { error: failures.get(job.entry.id) ?? new Error('failed') }
        : {},
    );
  }

  /**
   * Runs the handler of one entry and gives its outcome to `then` (settleOne() on the common path,
   * in the same step). Events take no async step of their own: one per entry counts.
   */
  private runOne<R = Outcome>(
    route: Route,
    job: Job,
    handle?: IdempotencyHandle,
    then: (outcome: Outcome) => R | PromiseLike<R> = asIs as (outcome: Outcome) => R,
  ): Promise<R> {
    if (this.givenUp(route)) return Promise.resolve(NOT_RUN).then(then);
    const { group, consumer } = this.deps;
    const { entry, decoded } = job;
    const ctx = new RedisStreamsContext([
      route.stream,
      entry.id,
      group,
      entry.deliveries,
      consumer,
      decoded.fields,
      decoded.headers,
      handle,
      route.partition,
    ]);
    if (route.replies && decoded.request)
      return this.runRequest(route, job, ctx, decoded.request).then(then);
    return this.deps.invoke(route, job.payload, ctx).then(
      () => then(ctx.isAckSkipped() ? ACK_SKIPPED : SUCCEEDED),
      (err: unknown) =>
        then({ error: (ctx.hasError() ? ctx.getError() : err) ?? new Error('handler failed') }),
    );
  }

  /** A request (`@MessagePattern`): its result or its error goes back to the caller. */
  private async runRequest(
    route: Route,
    job: Job,
    ctx: RedisStreamsContext,
    request: RequestInfo,
  ): Promise<Outcome> {
    let response: unknown;
    try {
      response = await this.deps.invoke(route, job.payload, ctx);
    } catch (err) {
      // The caller gets the error and decides: a request is not retried.
      const error = ctx.hasError() ? ctx.getError() : err;
      await this.sendReply(request, { err: error });
      return { error: error ?? new Error('handler failed'), answered: true };
    }
    await this.sendReply(request, { response });
    return ctx.isAckSkipped() ? ACK_SKIPPED : SUCCEEDED;
  }

  /**
   * An ordered partition that this consumer stopped owning since its entries were taken (the
   * awaits of decoding and idempotency lie in between): its handlers must not start any more.
   */
  private givenUp(route: Route): boolean {
    return route.ordered === true && !this.deps.owns?.(route.stream);
  }

  private async sendReply(
    request: RequestInfo,
    result: { response?: unknown; err?: unknown },
  ): Promise<void> {
    try {
      await this.deps.reply(request, result);
    } catch (err) {
      this.deps.logger.warn(
        `Reply to ${request.replyTo} (${request.id}) failed: ${describeError(err)}`,
      );
    }
  }

  /** Acknowledges what succeeded; retries (or dead-letters, at maxDeliveries) what failed. */
  private async settle(route: Route, jobs: Job[], outcomes: Outcome[]): Promise<void> {
    let dead: Promise<void>[] | undefined;
    for (let i = 0; i < jobs.length; i++) {
      const moved = this.settleOne(route, jobs[i], outcomes[i]);
      if (moved) (dead ??= []).push(moved);
    }
    if (dead) await Promise.all(dead);
  }

  /** settle() of one entry; returns the dead-lettering under way, if any. */
  private settleOne(route: Route, job: Job, outcome: Outcome): Promise<void> | undefined {
    const { stream } = route;
    if (outcome.heldBack || outcome.notRun) return undefined;
    const { entry, decoded } = job;
    if (outcome.error === undefined) {
      this.deps.telemetry.succeeded(1);
      if (entry.deliveries > 1) this.lastErrors.delete(`${stream}\u0000${entry.id}`);
      if (!outcome.skipAck) this.deps.batcher.add(stream, entry.id);
      return undefined;
    }
    this.deps.telemetry.failed(stream, 1);
    if (outcome.answered) {
      this.deps.batcher.add(stream, entry.id);
      return undefined;
    }
    const message = describeError(outcome.error);
    this.lastErrors.set(`${stream}\u0000${entry.id}`, message);
    if (entry.deliveries >= this.deps.maxDeliveries) {
      this.deps.logger.warn(
        `Entry ${entry.id} of "${stream}" failed on delivery ${entry.deliveries}/${this.deps.maxDeliveries} (${message}): moving it to the dead-letter stream.`,
      );
      return this.deadLetter(
        stream,
        entry,
        decoded.fields,
        entry.deliveries,
        'handler-failed',
        outcome.error,
      );
    }
    const delay = this.deps.reclaimer.scheduleRetry(stream, entry.id, entry.deliveries);
    this.deps.telemetry.retried(stream);
    this.deps.logger.warn(
      `Entry ${entry.id} of "${stream}" failed on delivery ${entry.deliveries}/${this.deps.maxDeliveries} (${message}); retrying in ${delay} ms.`,
    );
    return undefined;
  }

  private async deadLetter(
    stream: string,
    entry: DeliveredEntry,
    fields: Record<string, string>,
    deliveries: number,
    reason: DeadLetterCause,
    error: unknown,
  ): Promise<void> {
    try {
      await this.deps.deadLetters.write(stream, entry.id, fields, deliveries, reason, error);
      this.deps.telemetry.deadLettered(stream, entry.id, deliveries, reason, error);
      this.lastErrors.delete(`${stream}\u0000${entry.id}`);
    } catch (err) {
      // Still pending: the claim loop brings the entry back and it is dead-lettered then.
      this.deps.logger.error(
        `Dead-lettering entry ${entry.id} of "${stream}" failed: ${describeError(err)}`,
      );
    }
  }
}

function asIs<T>(value: T): T {
  return value;
}

/** The partition key of an entry (its `sba-partition-key` header), looked up once. */
function keyOf(entry: DeliveredEntry): string | undefined {
  if (entry.key === undefined) entry.key = partitionKeyOfFields(entry.fields) ?? null;
  return entry.key ?? undefined;
}
