import { Logger } from '@nestjs/common';
import {
  CustomTransportStrategy,
  MessageHandler,
  RpcException,
  Server,
} from '@nestjs/microservices';
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import { isObservable, lastValueFrom } from 'rxjs';
import { AckBatcher } from '../core/ack-batcher';
import { encodePayload, Headers, replyToRefusal, RequestInfo } from '../core/entry-codec';
import {
  describeError,
  NotInitializedError,
  StreamBatchAckConfigError,
  StreamBatchAckError,
} from '../core/errors';
import { LruCache } from '@nest-redis-resilience/common';
import type { IdempotentOptions } from '../idempotency/idempotency.options';
import { IdempotencyStore } from '../idempotency/idempotency.store';
import { PartitionLayout, StreamPartition } from '../partitions/partition-layout';
import { checkPartitionCounts } from '../partitions/partition-metadata';
import { defineLeaseScripts, LeaseScripts, leaseKeys } from '../partitions/lease-scripts';
import { PartitionOwnership } from '../partitions/partition-ownership';
import { readGroupStats, StreamGroupStats } from '../partitions/partition-stats';
import { closeClient, idempotencyClientOf, isClusterTarget } from '../redis/connection';
import {
  groupStreamsForReading,
  keySlot,
  REPLY_STREAM_IDLE_TTL_MS,
  REPLY_STREAM_MARKER,
} from '../redis/keys';
import { createGroup, readGroupInfo } from '../redis/group-info';
import { createManagedClient, EventListener } from './managed-client';
import { defineStreamScripts, StreamScripts } from '../redis/scripts';
import { ClaimHeartbeat } from './claim-heartbeat';
import { DeadLetterWriter } from '../dead-letter/dead-letter-writer';
import { EntryProcessor, Route } from './entry-processor';
import { FlowGate } from '../core/flow-gate';
import { DeliveredEntry, PendingReclaimer } from './pending-reclaimer';
import { RedisStreamsBatchContext, RedisStreamsContext } from './redis-streams.context';
import {
  RedisStreamsConnectionType,
  RedisStreamsEvents,
  RedisStreamsStatus,
} from '../redis/redis-streams.events';
import { RedisStreamsServerOptions, ResolvedServerOptions } from './redis-streams.options';
import { ServerTelemetry } from '../telemetry/server-telemetry';
import type { RedisStreamsEventBus } from '../telemetry/redis-streams.telemetry-events';
import { RedisStreamsServerMetrics } from '../telemetry/server-metrics';
import { resolveServerOptions } from './server-options';
import { RawEntry, StreamReader } from './stream-reader';

/** The last recreation of a stream's lost consumer group by this server (`server.groupRecreation()`). */
export interface GroupRecreation {
  /** The physical stream (a partition's, for a partitioned stream). */
  stream: string;
  /** The id the group was created at: entries after it are delivered. */
  fromId: string;
  /** True when the server knew no entry of the stream and used `startId`. */
  fromStartId: boolean;
  at: Date;
  /** Recreations since the server started (over every partition of the stream). */
  count: number;
}

/** The transport id of ServerRedisStreams (for `onProcessingStartHook` and friends). */
export const REDIS_STREAMS_TRANSPORT = Symbol('REDIS_STREAMS');
/** Reply streams are trimmed to about this many entries (a client reads and deletes its replies). */
const REPLY_STREAM_MAX_LEN = 10_000;

type Client = Redis | Cluster;
type CommandClient = Client & StreamScripts & LeaseScripts;

export { resolveServerOptions };

/**
 * A Nest microservice transport over Redis Streams consumer groups. Every `@EventPattern(stream)`
 * handler consumes one stream (`{ batch: true }`: the whole read batch at once); entries are
 * acknowledged in batches after their handler succeeded. `@MessagePattern(stream)` answers
 * `ClientRedisStreams.send()`.
 *
 * This class is the bridge to Nest; the work is done by StreamReader (XREADGROUP loops),
 * EntryProcessor (decode, duplicates, handlers, outcomes), PendingReclaimer (retries with backoff,
 * dead consumers' entries), DeadLetterWriter, FlowGate (bounds) and AckBatcher (XACK batches).
 */
export class ServerRedisStreams
  extends Server<RedisStreamsEvents, RedisStreamsStatus>
  implements CustomTransportStrategy
{
  protected override readonly logger = new Logger(ServerRedisStreams.name);
  readonly options: ResolvedServerOptions;

  /** The first blocking reader (the only one on a single Redis). */
  protected reader: Client | null = null;
  protected readers: Client[] = [];
  protected commands: CommandClient | null = null;
  protected batcher: AckBatcher | null = null;
  protected isManuallyClosed = false;
  private closePromise: Promise<void> | null = null;
  private pendingEventListeners: EventListener[] = [];
  private readGroups: string[][] = [];
  private readLoops: Promise<void>[] = [];
  private streamReaders: StreamReader[] = [];
  private gate: FlowGate | null = null;
  private reclaimer: PendingReclaimer | null = null;
  private heartbeat: ClaimHeartbeat | null = null;
  /** Who owns which partition of the ordered partitioned streams (`ordering: 'key'`). */
  private ownership: PartitionOwnership | null = null;
  /** The reader of each stream. */
  private readonly readerOf = new Map<string, StreamReader>();
  /** Per physical stream: the last entry id this server read, or the group's at start-up. */
  private readonly lastIds = new Map<string, string>();
  private readonly recreations = new Map<
    string,
    { fromId: string; fromStartId: boolean; at: number; count: number }
  >();
  private processor: EntryProcessor | null = null;
  private idempotency: IdempotencyStore | null = null;
  private ownedIdempotencyClient: Client | null = null;
  /** By physical stream: one route per partition of a partitioned stream. */
  private readonly routes = new Map<string, Route>();
  private readonly layout: PartitionLayout;
  private readonly telemetry: ServerTelemetry;
  private readonly customDeserializer: boolean;
  /** Nest's own processing start hook (it just runs the handler): replaced by setOnProcessingStartHook(). */
  private readonly defaultStartHook = this.onProcessingStartHook;
  /** Refused replies already logged, by reason and reply stream: each is logged once. */
  private readonly refusedReplies = new LruCache<true>({ maxSize: 1000, ttlMs: 3600_000 });

  constructor(options: RedisStreamsServerOptions) {
    super();
    this.transportId = REDIS_STREAMS_TRANSPORT;
    this.options = resolveServerOptions(options);
    this.layout = new PartitionLayout(this.options.partitions);
    this.initializeSerializer(options);
    this.initializeDeserializer(options);
    this.customDeserializer = options.deserializer !== undefined;
    this.telemetry = new ServerTelemetry({
      group: this.options.group,
      consumer: this.options.consumer,
      groupInfoIntervalMs: this.options.telemetry.groupInfoIntervalMs,
      eventEmitter: options.eventEmitter,
      logger: this.logger,
    });
  }

  /**
   * Dead letters, failed and recovered XACKs, claims: `server.events.on(name, listener)`, typed.
   * `server.events.forwardTo(app.get(EventEmitter2))` (or the option `eventEmitter`) also emits
   * them to `@OnEvent()` handlers.
   */
  get events(): RedisStreamsEventBus {
    return this.telemetry.events;
  }

  listen(callback: (...optionalParams: unknown[]) => any): void {
    void this.start().then(
      () => callback(),
      (err) => callback(err),
    );
  }

  protected async start(): Promise<void> {
    this.resolveRoutes();
    const streams = [...this.routes.keys()];
    const cluster = isClusterTarget(this.options.connection);
    if (cluster) this.checkClusterSlots(streams);
    this.readGroups = groupStreamsForReading(streams, cluster);
    this.readers = Array.from({ length: Math.max(1, this.readGroups.length) }, () =>
      this.createClient('reader', { maxRetriesPerRequest: null }),
    );
    this.reader = this.readers[0];
    const commands = defineLeaseScripts(defineStreamScripts(this.createClient('command', {})));
    this.commands = commands;
    this.pendingEventListeners = [];
    await Promise.all([...this.readers.map((r) => r.connect()), commands.connect()]);
    try {
      // Partition counts: recorded by the first producer or consumer, a mismatch is refused.
      await checkPartitionCounts(
        commands,
        [...this.routes.values()].map((r) => r.pattern ?? r.stream),
        this.options.partitions,
        'server',
      );
    } catch (err) {
      await this.close();
      throw err;
    }
    await this.ensureGroups();
    this.idempotency = this.createIdempotencyStore(commands);

    const { options } = this;
    const ownership = this.createOwnership(commands);
    const ordered = (stream: string) => ownership?.manages(stream) ?? false;
    const batcher = new AckBatcher((stream, ids) => this.acknowledge(stream, ids), {
      batchSize: options.ack.batchSize,
      intervalMs: options.ack.intervalMs,
      backoff: options.ack.backoff,
      onError: (err) => {
        this.logger.warn(err.message);
        this.telemetry.ackFailed(err);
      },
      onFlush: (stream, ids) => this.telemetry.acked(stream, ids.length),
    });
    this.batcher = batcher;
    const gate = new FlowGate(
      { concurrency: options.concurrency, maxPending: options.ack.maxPending },
      () => batcher.size + (this.reclaimer?.waiting ?? 0),
    );
    this.gate = gate;
    batcher.onChange(() => gate.progress());
    this.reclaimer = new PendingReclaimer(
      commands,
      {
        group: options.group,
        consumer: options.consumer,
        claim: options.claim,
        retry: options.retry,
      },
      gate,
      {
        isBusy: (stream, id) => this.processor!.isBusy(stream, id),
        claimable: (stream) => !ordered(stream) || ownership!.owns(stream),
        deliver: (stream, entries) => this.deliver(stream, entries),
        acknowledge: (stream, id) => batcher.add(stream, id),
        claimed: (stream, count, owners) => this.telemetry.claimed(stream, count, owners),
      },
      this.logger,
    );
    this.processor = new EntryProcessor({
      group: options.group,
      consumer: options.consumer,
      maxDeliveries: options.deadLetter.maxDeliveries,
      gate,
      batcher,
      reclaimer: this.reclaimer,
      deadLetters: new DeadLetterWriter(commands, {
        group: options.group,
        consumer: options.consumer,
        deadLetterStream: options.deadLetter.stream,
        maxLen: options.deadLetter.maxLen,
      }),
      idempotency: this.idempotency,
      telemetry: this.telemetry,
      logger: this.logger,
      invoke: (route, payload, ctx) => this.invoke(route, payload, ctx),
      deserialize: (route, payload, request, headers) =>
        this.deserializePayload(route, payload, request, headers),
      replyPrefix: options.replyPrefix,
      reply: (request, result) => this.reply(request, result),
      owns: (stream) => ownership?.owns(stream) ?? false,
    });
    this.telemetry.start({
      streams,
      commands,
      inFlight: (stream) => this.processor?.inFlightOf(stream) ?? 0,
    });
    if (streams.length === 0) {
      this.logger.warn('No @EventPattern or @MessagePattern handlers registered: nothing to read.');
      return;
    }
    this.streamReaders = this.readGroups.map(
      (group, i) =>
        new StreamReader(
          this.readers[i],
          group,
          {
            group: options.group,
            consumer: options.consumer,
            count: options.read.count,
            // Shorter than the fencing margin of a lease: a read never outlasts the lease it began under.
            blockMs: group.some(ordered)
              ? Math.min(options.read.blockMs, ownership!.maxBlockMs)
              : options.read.blockMs,
            readable: ownership
              ? (stream) => !ordered(stream) || ownership.reads(stream)
              : undefined,
          },
          gate,
          (stream, entries) => {
            this.lastIds.set(stream, entries[entries.length - 1][0]);
            this.deliver(stream, toDelivered(entries));
          },
          () => this.recreateGroups(group),
          this.logger,
        ),
    );
    this.readGroups.forEach((group, i) => {
      for (const stream of group) this.readerOf.set(stream, this.streamReaders[i]);
    });
    this.readLoops = this.streamReaders.map((r) => r.run());
    await ownership?.start();
    this.reclaimer.start(streams);
    this.heartbeat = new ClaimHeartbeat(
      commands,
      { group: options.group, consumer: options.consumer, minIdleMs: options.claim.minIdleMs },
      () => this.processor!.held(),
      this.logger,
    );
    this.heartbeat.start();
  }

  /** Reads each handler's decorators once: batch mode, request-reply, idempotency. */
  private resolveRoutes(): void {
    this.routes.clear();
    const idem = this.options.idempotency;
    const patternOf = new Map<string, string>();
    for (const [pattern, handler] of this.messageHandlers) {
      const logical = this.streamOf(pattern);
      const other = patternOf.get(logical);
      if (other !== undefined)
        throw new StreamBatchAckConfigError(
          'streams',
          `the handlers of '${other}' and '${pattern}' would both read the stream "${logical}": one handler per stream.`,
        );
      patternOf.set(logical, pattern);
      const extras = (handler as MessageHandler).extras ?? {};
      const batch = extras.batch === true;
      const replies = !(handler as MessageHandler).isEventHandler;
      if (batch && replies)
        throw new StreamBatchAckConfigError(
          'batch',
          `@MessagePattern('${pattern}') cannot take batches: use @EventPattern('${pattern}', { batch: true }).`,
        );
      const marked = extras.idempotent as IdempotentOptions | undefined;
      const route: Route = { stream: logical, batch, replies };
      if (logical !== pattern) route.handler = pattern;
      if (marked || idem)
        route.idempotent = {
          key: marked?.key,
          ttlMs: marked?.ttlMs ?? idem?.ttlMs ?? 60_000,
          lockMs: marked?.lockMs ?? idem?.lockMs ?? 30_000,
        };
      if (this.layout.count(logical) === undefined) this.routes.set(logical, route);
      // A partitioned stream: one route per partition, all calling the handler of the pattern.
      else
        for (const stream of this.layout.streams(logical))
          this.routes.set(stream, {
            ...route,
            stream,
            pattern: logical,
            partition: this.layout.locate(stream),
            ordered: this.options.ordering === 'key',
          });
    }
    for (const logical of this.options.partitions.keys())
      if (!patternOf.has(logical))
        this.logger.warn(
          `partitions['${logical}'] is set, but no @EventPattern or @MessagePattern handler reads the stream '${logical}' here: its partitions are not read.`,
        );
    for (const [pattern, stream] of this.options.streams)
      if (!this.messageHandlers.has(pattern))
        this.logger.warn(
          `streams['${pattern}'] is set, but no @EventPattern('${pattern}') or @MessagePattern('${pattern}') handler is registered here: '${stream}' is not read.`,
        );
  }

  /** The stream that the handler of `pattern` reads: the pattern, unless the option `streams` maps it. */
  private streamOf(pattern: string): string {
    return this.options.streams.get(pattern) ?? pattern;
  }

  /** The leases of the ordered partitions, or null when no handler reads an ordered partition. */
  private createOwnership(commands: CommandClient): PartitionOwnership | null {
    const byLogical = new Map<string, StreamPartition[]>();
    for (const route of this.routes.values())
      if (route.ordered && route.partition) {
        const list = byLogical.get(route.partition.logicalStream) ?? [];
        list.push(route.partition);
        byLogical.set(route.partition.logicalStream, list);
      }
    if (byLogical.size === 0) return null;
    const { group, consumer, leaseMs, shutdownTimeoutMs } = this.options;
    this.ownership = new PartitionOwnership(
      commands,
      { group, consumer, leaseMs },
      byLogical,
      {
        takeOver: (p) => this.reclaimer!.takeOver(p.stream),
        handOver: async (p) => {
          // No new reads or claims of the partition from here (it is not owned any more): wait
          // for the read under way, drop what waits, let running handlers finish, send the acks.
          await this.readerOf.get(p.stream)?.settled();
          this.processor!.dropPartition(p.stream);
          const deadline = Date.now() + shutdownTimeoutMs;
          while (this.processor!.inFlightOf(p.stream) > 0 && Date.now() < deadline)
            await new Promise((resolve) => setTimeout(resolve, 20));
          await this.batcher!.flush();
        },
        lost: (p) => this.processor?.dropPartition(p.stream),
        assigned: (p, token, takenOver) => this.telemetry.partitionAssigned(p, token, takenOver),
        released: (p, reason) => this.telemetry.partitionReleased(p, reason),
        leaseLost: (p, reason) => this.telemetry.partitionLost(p, reason),
      },
      this.logger,
    );
    return this.ownership;
  }

  /**
   * The batched XACK. On an ordered partition it goes through a script that checks the lease
   * first: after the partition moved, the new owner handles those entries again.
   */
  private async acknowledge(stream: string, ids: string[]): Promise<unknown> {
    const commands = this.unwrapCommands();
    const { group } = this.options;
    if (!this.ownership?.manages(stream)) return commands.xack(stream, group, ...ids);
    const holder = this.ownership.holder(stream);
    const acked = holder
      ? await commands.sbaFencedAck(stream, leaseKeys.lease(stream, group), group, holder, ...ids)
      : -1;
    if (acked === -1) {
      this.telemetry.acksFenced(ids.length);
      this.logger.warn(
        `${ids.length} ack(s) on "${stream}" refused: the partition moved to another consumer, which handles those entries again.`,
      );
    }
    return acked;
  }

  /**
   * The partitions of the partitioned stream `stream` (its logical name) that this consumer owns
   * now (`ordering: 'key'`), or every partition with `ordering: 'none'` (all are read here).
   */
  ownedPartitions(stream: string): number[] {
    const count = this.layout.count(stream);
    if (count === undefined) return [];
    if (!this.ownership) return Array.from({ length: count }, (_, i) => i);
    return this.ownership.owned(stream);
  }

  private createIdempotencyStore(commands: CommandClient): IdempotencyStore | null {
    const idem = this.options.idempotency;
    if (![...this.routes.values()].some((r) => r.idempotent)) return null;
    let redis: Client | null = null;
    if (idem?.store === 'redis') {
      if (idem.redis === undefined) redis = commands;
      else {
        const { client, owned } = idempotencyClientOf(idem.redis);
        redis = client as Client;
        if (owned) this.ownedIdempotencyClient = redis;
      }
    }
    return new IdempotencyStore({
      redis,
      keyPrefix: idem?.keyPrefix,
      ttlMs: idem?.ttlMs,
      lockMs: idem?.lockMs,
      maxSize: idem?.maxSize,
    });
  }

  private deliver(stream: string, entries: DeliveredEntry[]): void {
    const route = this.routes.get(stream);
    if (!route) {
      this.logger.error(
        `No handler for stream "${stream}"; ${entries.length} entries stay pending.`,
      );
      return;
    }
    this.processor!.process(route, entries);
  }

  /**
   * Calls the handler through Nest (guards, interceptors, pipes, filters). The patterns are the
   * stream keys: a direct map lookup (Nest's getHandlerByPattern first tries JSON.parse on the
   * pattern, and the exception it throws per message costs more than the rest of the handling).
   */
  private invoke(
    route: Route,
    payload: unknown,
    ctx: RedisStreamsContext | RedisStreamsBatchContext,
  ): Promise<unknown> {
    const handler = this.messageHandlers.get(route.handler ?? route.pattern ?? route.stream)!;
    // Nothing to record and no processing hooks: the handler alone (no step of ours per message).
    if (
      this.onProcessingStartHook === this.defaultStartHook &&
      this.onProcessingEndHook === undefined &&
      !this.telemetry.recordsCalls
    )
      try {
        return Promise.resolve(handler(payload, ctx)).then(settled);
      } catch (err) {
        return Promise.reject(err as Error);
      }
    return this.invokeWithHooks(route, handler, payload, ctx);
  }

  /** invoke() inside the telemetry's span and Nest's processing hooks. */

  private async invokeWithHooks(
    route: Route,
    handler: MessageHandler,
    payload: unknown,
    ctx: RedisStreamsContext | RedisStreamsBatchContext,
  ): Promise<unknown> {
    let response: unknown;
    await this.telemetry.process(route.stream, route.batch, ctx, async () => {
      try {
        await this.onProcessingStartHook(this.transportId!, ctx, async () => {
          response = await settled(await handler(payload, ctx));
        });
      } finally {
        this.onProcessingEndHook?.(this.transportId!, ctx);
      }
    });
    return response;
  }

  /**
   * The handler's payload; a Promise when the custom deserializer is asynchronous (Nest allows
   * it). The deserializer gets `{ pattern, data, id?, metadata? }`: `metadata` is the entry's
   * headers (the packet metadata of NestJS 12 and the record's headers), when it has any.
   */
  private deserializePayload(
    route: Route,
    payload: unknown,
    request: RequestInfo | undefined,
    headers: Headers,
  ): unknown {
    if (!this.customDeserializer) return payload;
    const pattern = route.handler ?? route.pattern ?? route.stream;
    const packet: { pattern: string; data: unknown; id?: string; metadata?: Headers } = {
      pattern,
      data: payload,
    };
    if (request) packet.id = request.id;
    if (Object.keys(headers).length > 0) packet.metadata = headers;
    const deserialized = this.deserializer.deserialize(packet, {
      channel: route.stream,
    }) as unknown;
    return deserialized instanceof Promise
      ? deserialized.then(dataOfPacket)
      : dataOfPacket(deserialized);
  }

  /**
   * Appends the reply to the client's reply stream, which expires unless the client is alive.
   * Only into a stream of the reply namespace that a client created (requests naming another
   * `replyTo` were dead-lettered before their handler ran): one script checks that and writes, so
   * a request can never make the server trim or expire another key. A refused reply is dropped
   * and logged once per reason and stream.
   */
  private async reply(
    request: RequestInfo,
    result: { response?: unknown; err?: unknown },
  ): Promise<void> {
    const refusal = replyToRefusal(request.replyTo, this.options.replyPrefix);
    if (refusal) {
      this.refuseReply(request, 'name', refusal);
      return;
    }
    const commands = this.unwrapCommands();
    // Nest's Serializer may be asynchronous (NestJS 12).
    let packet: unknown = this.serializer.serialize({
      id: request.id,
      response: result.response,
      err: result.err === undefined ? undefined : replyError(result.err),
      isDisposed: true,
    });
    if (packet instanceof Promise) packet = await packet;
    const [written, kind] = await commands.sbaReply(
      request.replyTo,
      REPLY_STREAM_MARKER,
      String(REPLY_STREAM_MAX_LEN),
      String(REPLY_STREAM_IDLE_TTL_MS),
      ...encodePayload(packet),
    );
    if (written === 1) return;
    this.refuseReply(
      request,
      kind,
      kind === 'none'
        ? 'it does not exist: its client closed, or has been gone for a while'
        : kind === 'unmarked'
          ? `it is a stream that no ClientRedisStreams created (it has no "${REPLY_STREAM_MARKER}" group)`
          : `it is a ${kind}, not a stream`,
    );
  }

  private refuseReply(request: RequestInfo, kind: string, reason: string): void {
    const key = `${kind}\u0000${request.replyTo}`;
    if (this.refusedReplies.has(key)) return;
    this.refusedReplies.set(key, true);
    this.logger.warn(
      `Not replying to request ${request.id} into ${JSON.stringify(request.replyTo)}: ${reason}. ` +
        'The reply is dropped and the request acknowledged; further replies refused for this reason and stream are not logged.',
    );
  }

  /**
   * The streams this server reads, as its handlers name them (`@EventPattern(stream)`,
   * `@MessagePattern(stream)`, or the stream the option `streams` maps their pattern to): a
   * partitioned stream by its logical name (`partitionStreams(stream)` lists its partitions).
   * Known once Nest registered the handlers.
   */
  get streams(): string[] {
    return [...this.messageHandlers.keys()].map((pattern) => this.streamOf(pattern));
  }

  /** The streams each blocking reader reads with one XREADGROUP call (one group on a single Redis). */
  get readerStreams(): string[][] {
    return this.readGroups.map((g) => [...g]);
  }

  /** On a Cluster, the dead-letter script touches a stream and its dead-letter stream: one slot. */
  private checkClusterSlots(streams: string[]): void {
    for (const stream of streams) {
      const dlq = this.options.deadLetter.stream(stream);
      if (keySlot(dlq) !== keySlot(stream))
        throw new StreamBatchAckError(
          'CROSS_SLOT',
          `Redis Cluster: stream "${stream}" and its dead-letter stream "${dlq}" are in different hash slots. ` +
            `Give the stream a hash tag (e.g. "{${stream}}", whose default dead-letter stream is "{${stream}}:dlq"), ` +
            `or a deadLetter.stream function that keeps the tag.`,
        );
    }
  }

  /** The entries handled right now. */
  get inFlightCount(): number {
    return this.gate?.inFlight ?? 0;
  }

  /** Ids processed and waiting for their batched XACK. */
  get pendingAcks(): number {
    return this.batcher?.size ?? 0;
  }

  /** Failed entries waiting for their retry (backoff). */
  get waitingRetries(): number {
    return this.reclaimer?.waiting ?? 0;
  }

  /** Counters since start. */
  metrics(): RedisStreamsServerMetrics {
    return this.telemetry.metrics();
  }

  /** Acknowledge every queued id now (normally done by size/interval). */
  async flushAcks(): Promise<void> {
    await this.batcher?.flush();
  }

  /**
   * One claim round on `stream` (normally run every `claim.intervalMs`); on each partition of a
   * partitioned stream (resolves with the sum), of an ordered one only on those this server owns.
   */
  async claimOnce(stream: string): Promise<number> {
    if (!this.reclaimer) throw new NotInitializedError('ServerRedisStreams');
    let claimed = 0;
    for (const physical of this.layout.streams(stream))
      if (!this.ownership?.manages(physical) || this.ownership.owns(physical))
        claimed += await this.reclaimer.claimOnce(physical);
    return claimed;
  }

  /**
   * The physical streams of a logical stream: its partitions (`ticks:{0.1}`, ...), partition 0
   * first, or `[stream]` when it is not partitioned.
   */
  partitionStreams(stream: string): string[] {
    return this.layout.streams(stream);
  }

  /**
   * The group's pending count and lag on each partition of `stream` and in sum (XINFO GROUPS; a
   * stream that is not partitioned counts as one partition).
   */
  async streamStats(stream: string): Promise<StreamGroupStats> {
    return readGroupStats(
      this.unwrapCommands(),
      stream,
      this.layout.streams(stream),
      this.options.group,
    );
  }

  async close(): Promise<void> {
    if (!this.closePromise) this.closePromise = this.doClose();
    return this.closePromise;
  }

  /**
   * A Nest lifecycle hook, called when this instance is also a provider of the app (as for the
   * health check: `{ provide: ServerRedisStreams, useValue: server }`): closes the server, as
   * `close()`. A hybrid app (`connectMicroservice()`) runs every `onModuleDestroy` hook, root
   * module first, then the modules it imports, before it closes its connected microservices; so
   * the server provided in the root module stops reading, lets its running handlers finish and
   * flushes its acks while the providers of the imported modules (which the handlers use) are
   * still alive. Nest's own `close()` of the server later is then a no-op.
   */
  onModuleDestroy(): Promise<void> {
    return this.close();
  }

  private async doClose(): Promise<void> {
    this.isManuallyClosed = true;
    // Leases are renewed until the acks are sent, none taken from now on.
    this.ownership?.freeze();
    this.gate?.close();
    // 1. Stop reading. The XREADGROUP in flight returns within read.blockMs, and its entries are
    // handled: disconnecting during it could drop a reply whose entries Redis already made
    // pending for this consumer (they would wait for a claim). A reader that does not return in
    // time (Redis unreachable) is disconnected.
    const readsEnded = Promise.allSettled(this.readLoops);
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      readsEnded,
      new Promise((resolve) => (timer = setTimeout(resolve, this.options.read.blockMs + 1000))),
    ]);
    clearTimeout(timer);
    for (const reader of this.readers) reader.disconnect();
    await Promise.allSettled([readsEnded, this.reclaimer?.stop()]);
    // 2. Let running handlers finish, within the bound.
    const deadline = Date.now() + this.options.shutdownTimeoutMs;
    const still = (await this.processor?.drain(this.options.shutdownTimeoutMs)) ?? 0;
    if (still > 0)
      this.logger.warn(
        `${still} handler call(s) still running after ${this.options.shutdownTimeoutMs} ms; their entries stay pending and will be delivered again.`,
      );
    // 3. Flush every queued ack.
    if (this.batcher) {
      const left = await this.batcher.close(Math.max(1000, deadline - Date.now()));
      if (left > 0)
        this.logger.error(
          `${left} ack(s) could not be sent before shutdown; those entries stay pending and will be delivered again.`,
        );
    }
    // 4. Give the partitions up at once (not after leaseMs), and close the connections. The
    // heartbeat ran until now: entries of handlers that were still finishing, and of acks still
    // queued, were not taken over in the meantime.
    await this.ownership?.stop();
    this.heartbeat?.stop();
    await Promise.all([closeClient(this.ownedIdempotencyClient), closeClient(this.commands)]);
    this.telemetry.stop();
    this.pendingEventListeners = [];
  }

  on<
    EventKey extends keyof RedisStreamsEvents = keyof RedisStreamsEvents,
    EventCallback extends RedisStreamsEvents[EventKey] = RedisStreamsEvents[EventKey],
  >(event: EventKey, callback: EventCallback): void {
    if (this.reader && this.commands) {
      for (const reader of this.readers)
        reader.on(event, (...args: unknown[]) => (callback as any)('reader', ...args));
      this.commands.on(event, (...args: unknown[]) => (callback as any)('command', ...args));
    } else {
      this.pendingEventListeners.push({ event, callback: callback as any });
    }
  }

  /**
   * `[reader, commands]`: the blocking connection and the command connection (ioredis `Redis`, or
   * `Cluster` clients; with several readers on a Cluster, the first one; see `readerStreams`).
   */
  unwrap<T>(): T {
    if (!this.reader || !this.commands) throw new NotInitializedError('ServerRedisStreams');
    return [this.reader, this.commands] as T;
  }

  protected unwrapCommands(): CommandClient {
    if (!this.commands) throw new NotInitializedError('ServerRedisStreams');
    return this.commands;
  }

  protected createClient(type: RedisStreamsConnectionType, overrides: RedisOptions): Client {
    return createManagedClient(this.options.connection, overrides, {
      type,
      logger: this.logger,
      isClosed: () => this.isManuallyClosed,
      listeners: this.pendingEventListeners,
      onStatus: (status) => {
        if (status !== RedisStreamsStatus.CONNECTED) this._status$.next(status);
        else if (
          this.readers.every((r) => r.status === 'ready') &&
          this.commands?.status === 'ready'
        )
          this._status$.next(status);
      },
    });
  }

  /**
   * At start: creates the group at `startId` on every stream that lacks it, and notes where the
   * group is (its last-delivered-id): should the group be lost before this server reads anything,
   * it is recreated there rather than at `startId`.
   */
  protected async ensureGroups(): Promise<void> {
    const commands = this.unwrapCommands();
    const { group, startId } = this.options;
    await Promise.all(
      [...this.routes.keys()].map(async (stream) => {
        await createGroup(commands, stream, group, startId);
        const info = await readGroupInfo(commands, stream, group, 1000).catch(() => undefined);
        const last = info?.lastDeliveredId;
        if (last && last !== '0-0' && !this.lastIds.has(stream)) this.lastIds.set(stream, last);
      }),
    );
  }

  /**
   * After NOGROUP (XGROUP DESTROY, or the stream deleted): creates the group again on the streams
   * of `streams` that lack it, after the last entry this server read there, so that nothing it
   * read is delivered again and nothing written since is skipped (stream ids grow with time, also
   * in a stream deleted and written again); at `startId` only when it knows no entry. A group that
   * exists (BUSYGROUP: another consumer recreated it first) is left as it is.
   */
  private async recreateGroups(streams: readonly string[]): Promise<void> {
    const commands = this.unwrapCommands();
    const { group, startId } = this.options;
    for (const stream of streams) {
      const known = this.lastIds.get(stream);
      const fromId = known ?? startId;
      if (!(await createGroup(commands, stream, group, fromId))) continue;
      const count = (this.recreations.get(stream)?.count ?? 0) + 1;
      this.recreations.set(stream, { fromId, fromStartId: !known, at: Date.now(), count });
      this.logger.warn(
        `Consumer group "${group}" was missing on stream "${stream}" (XGROUP DESTROY, or the stream was deleted): ` +
          (known
            ? `created it again after the last entry this server read, ${fromId}. `
            : `created it again at startId ${startId}: this server had read nothing from the stream. `) +
          'Entries that were pending in the lost group (delivered, not acknowledged) are not delivered again.',
      );
      this.telemetry.groupRecreated(stream, fromId, !known);
    }
  }

  /**
   * The last time since start that this server recreated the lost consumer group of `stream`
   * (of one of its partitions), or undefined. The health indicator reports it as `groupRecreated`.
   */
  groupRecreation(stream: string): GroupRecreation | undefined {
    const found = this.layout.streams(stream).flatMap((physical) => {
      const r = this.recreations.get(physical);
      return r ? [{ ...r, stream: physical }] : [];
    });
    if (found.length === 0) return undefined;
    const last = found.reduce((a, b) => (b.at > a.at ? b : a));
    return {
      stream: last.stream,
      fromId: last.fromId,
      fromStartId: last.fromStartId,
      at: new Date(last.at),
      count: found.reduce((n, r) => n + r.count, 0),
    };
  }
}

/** What the caller's `send()` errors with: an RpcException's error (string or object), else the message. */
function replyError(err: unknown): unknown {
  if (err instanceof RpcException) return err.getError();
  if (err instanceof Error) return err.message;
  return err !== null && typeof err === 'object' ? err : describeError(err);
}

/**
 * A handler's result: an Observable (interceptors, or a handler that returns one) completes before
 * the ack; a plain value needs no round through rxjs.
 */
function settled(result: unknown): unknown {
  return isObservable(result) ? lastValueFrom(result, { defaultValue: undefined }) : result;
}

function dataOfPacket(packet: unknown): unknown {
  return packet && typeof packet === 'object' && 'data' in packet
    ? (packet as { data: unknown }).data
    : packet;
}

function toDelivered(entries: RawEntry[]): DeliveredEntry[] {
  const out: DeliveredEntry[] = [];
  for (const [id, fields] of entries) if (fields) out.push({ id, fields, deliveries: 1 });
  return out;
}
