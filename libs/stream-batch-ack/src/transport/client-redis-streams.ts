import { Logger } from '@nestjs/common';
import { ClientProxy, ReadPacket, WritePacket } from '@nestjs/microservices';
import type { Cluster, Redis } from 'ioredis';
import { randomUUID } from 'node:crypto';
import {
  decodeEntry,
  DEFAULT_REPLY_PREFIX,
  encodePayload,
  Headers,
  mergeMetadata,
  PARTITION_KEY_HEADER,
  replyStreamName,
} from '../core/entry-codec';
import { describeError, NotInitializedError, RequestTimeoutError } from '../core/errors';
import {
  PartitionLayout,
  PartitionRouter,
  resolvePartitions,
} from '../partitions/partition-layout';
import { checkPartitionCounts } from '../partitions/partition-metadata';
import { closeClient } from '../redis/connection';
import { REPLY_STREAM_IDLE_TTL_MS, REPLY_STREAM_MARKER } from '../redis/keys';
import { createManagedClient, EventListener } from './managed-client';
import { defineStreamScripts, StreamScripts } from '../redis/scripts';
import { RedisStreamsEvents } from '../redis/redis-streams.events';
import { RedisStreamsClientOptions } from './redis-streams.options';
import { RedisStreamsRecord } from './redis-streams.record';
import { checkClientOptions } from './client-options';
import { ClientTelemetry } from '../telemetry/client-telemetry';

type Client = (Redis | Cluster) & StreamScripts;

/** What is written for one packet. */
interface OutgoingMessage {
  data: unknown;
  headers?: Headers;
  partitionKey?: string;
}

/**
 * The metadata of a packet: set by a dispatch hook (`ClientProxy#setOnDispatchHook`, NestJS 12).
 * The serializer's output keeps it, or replaces it with its own `metadata`.
 */
function metadataOf(packet: unknown): unknown {
  return packet !== null && typeof packet === 'object' && 'metadata' in packet
    ? (packet as { metadata?: unknown }).metadata
    : undefined;
}

function toOutgoing(packet: ReadPacket, serialized: unknown): OutgoingMessage {
  const data: unknown = (serialized as ReadPacket | undefined)?.data;
  const metadata = metadataOf(serialized) ?? metadataOf(packet);
  return data instanceof RedisStreamsRecord
    ? {
        data: data.data,
        headers: mergeMetadata(metadata, data.headers),
        partitionKey: data.options?.partitionKey,
      }
    : { data, headers: mergeMetadata(metadata) };
}

interface PendingRequest {
  callback: (packet: WritePacket) => void;
  timer: ReturnType<typeof setTimeout>;
}

/**
 * The producer side. `emit(stream, data)` appends `data` as JSON in the `data` field of a new
 * entry (XADD); wrap it in `new RedisStreamsRecord(data, headers)` to add headers. Emits of the
 * same tick go out as one pipeline. `send(stream, data)` is a request: the entry also carries a
 * correlation id and this client's reply stream, which a blocking reader watches. With `maxLen`,
 * streams are trimmed without deleting entries that a consumer group has not acknowledged.
 */
export class ClientRedisStreams extends ClientProxy<RedisStreamsEvents> {
  protected readonly logger = new Logger(ClientRedisStreams.name);
  protected client: Client | null = null;
  protected connectionPromise: Promise<void> | null = null;
  protected isManuallyClosed = false;
  /**
   * The stream where this client's replies arrive, `<replyPrefix>{<uuid>}`. The client creates it
   * (marked as a reply stream) before its first request and keeps it alive while it sends.
   */
  readonly replyStream: string;
  /** The last creation/renewal of the reply stream, and until when it needs none. */
  private replyStreamRenewal: { until: number; done: Promise<void> } | null = null;
  private replyReader: Redis | Cluster | null = null;
  private replyLoop: Promise<void> | null = null;
  private readonly requests = new Map<string, PendingRequest>();
  private pendingEventListeners: EventListener[] = [];
  private readonly emitsSinceTrim = new Map<string, number>();
  private readonly trims = new Set<Promise<unknown>>();
  private readonly router: PartitionRouter;
  /** Streams without partitions that were checked not to be partitioned by someone else. */
  private readonly unpartitionedChecked = new Set<string>();
  private readonly telemetry = new ClientTelemetry();

  constructor(protected readonly options: RedisStreamsClientOptions) {
    super();
    checkClientOptions(options);
    this.replyStream = replyStreamName(options.replyPrefix ?? DEFAULT_REPLY_PREFIX, randomUUID());
    this.router = new PartitionRouter(new PartitionLayout(resolvePartitions(options.partitions)));
    this.initializeSerializer(options);
    this.initializeDeserializer(options);
  }

  async connect(): Promise<any> {
    if (this.client) return this.connectionPromise;
    this.isManuallyClosed = false;
    const client = defineStreamScripts(
      createManagedClient(
        this.options.connection,
        { enableAutoPipelining: true },
        {
          type: 'client',
          logger: this.logger,
          isClosed: () => this.isManuallyClosed,
          listeners: this.pendingEventListeners,
          onStatus: (status) => this._status$.next(status),
        },
      ),
    );
    this.pendingEventListeners = [];
    this.client = client;
    const counts = this.router.layout.counts;
    this.connectionPromise = (async () => {
      await client.connect();
      // Partition counts: recorded by the first producer or consumer, a mismatch is refused.
      if (counts.size > 0) await checkPartitionCounts(client, counts.keys(), counts, 'client');
    })().catch((err) => {
      this.client = null;
      this.connectionPromise = null;
      client.disconnect();
      throw err;
    });
    return this.connectionPromise;
  }

  async close(): Promise<void> {
    this.isManuallyClosed = true;
    const client = this.client;
    this.client = null;
    this.connectionPromise = null;
    for (const [id, request] of this.requests) {
      clearTimeout(request.timer);
      request.callback({
        err: new Error(`ClientRedisStreams closed before the reply to ${id}`),
        isDisposed: true,
      });
    }
    this.requests.clear();
    this.replyReader?.disconnect();
    await Promise.allSettled([...this.trims, this.replyLoop]);
    this.replyReader = null;
    this.replyLoop = null;
    this.replyStreamRenewal = null;
    if (client?.status === 'ready') await client.del(this.replyStream).catch(() => undefined);
    await closeClient(client);
    this.pendingEventListeners = [];
  }

  override on<
    EventKey extends keyof RedisStreamsEvents = keyof RedisStreamsEvents,
    EventCallback extends RedisStreamsEvents[EventKey] = RedisStreamsEvents[EventKey],
  >(event: EventKey, callback: EventCallback): void {
    if (this.client)
      this.client.on(event, (...args: unknown[]) => (callback as any)('client', ...args));
    else this.pendingEventListeners.push({ event, callback: callback as any });
  }

  unwrap<T>(): T {
    if (!this.client) throw new NotInitializedError('ClientRedisStreams');
    return this.client as T;
  }

  /**
   * Trims `stream` to about `maxLen` entries (default: the client's `maxLen`), keeping every entry
   * that a group has not acknowledged yet. Resolves with the number of entries deleted.
   */
  async trim(stream: string, maxLen = this.options.maxLen): Promise<number> {
    if (maxLen === undefined) return 0;
    await this.connect();
    const client = this.unwrap<Client>();
    const count = this.router.layout.count(stream);
    if (count === undefined) {
      const [deleted] = await client.sbaSafeTrim(stream, String(maxLen));
      return Number(deleted);
    }
    // A partitioned stream: each partition keeps about maxLen / partitions entries.
    const each = String(Math.ceil(maxLen / count));
    const results = await Promise.all(
      this.router.layout.streams(stream).map((partition) => client.sbaSafeTrim(partition, each)),
    );
    return results.reduce((sum, [deleted]) => sum + Number(deleted), 0);
  }

  /**
   * The stream a message to `stream` is appended to: for a partitioned stream, the partition of
   * its key (the record's `partitionKey`, else the `partitionKey` option; none: round robin).
   * A stream without partitions is checked once not to be partitioned by other clients or servers.
   */
  private async target(
    stream: string,
    data: unknown,
    key: string | undefined,
    client: Client,
  ): Promise<[stream: string, key: string | undefined]> {
    if (this.router.layout.count(stream) !== undefined) {
      key ??= this.options.partitionKey?.(stream, data);
      return [this.router.route(stream, key), key];
    }
    if (!this.unpartitionedChecked.has(stream)) {
      await checkPartitionCounts(client, [stream], this.router.layout.counts, 'client');
      this.unpartitionedChecked.add(stream);
    }
    return [stream, undefined];
  }

  protected async dispatchEvent<T = any>(packet: ReadPacket): Promise<T> {
    const message = this.serialize(packet);
    const { data, headers, partitionKey } = message instanceof Promise ? await message : message;
    const client = this.unwrap<Client>();
    const [stream, key] = await this.target(
      this.normalizePattern(packet.pattern),
      data,
      partitionKey,
      client,
    );
    const id = (await this.telemetry.send(stream, withPartitionKey(headers, key), (h) =>
      client.call('XADD', stream, '*', ...encodePayload(data, h)),
    )) as string;
    this.maybeTrim(stream);
    return id as T;
  }

  protected publish(
    packet: ReadPacket & { id?: string },
    callback: (packet: WritePacket) => void,
  ): () => void {
    const stream = this.normalizePattern(packet.pattern);
    const id = packet.id ?? randomUUID();
    let client: Client;
    try {
      client = this.unwrap<Client>();
      this.startReplyReader(client);
    } catch (err) {
      callback({ err, isDisposed: true });
      return () => undefined;
    }
    const timeoutMs = this.options.replyTimeoutMs ?? 30_000;
    const timer = setTimeout(() => {
      if (!this.requests.delete(id)) return;
      callback({ err: new RequestTimeoutError(stream, id, timeoutMs), isDisposed: true });
    }, timeoutMs);
    this.requests.set(id, { callback, timer });
    const write = async () => {
      const message = this.serialize(packet);
      const { data, headers, partitionKey } = message instanceof Promise ? await message : message;
      const [[physical, key]] = await Promise.all([
        this.target(stream, data, partitionKey, client),
        this.renewReplyStream(client),
      ]);
      await this.telemetry.send(physical, withPartitionKey(headers, key), (h) =>
        client.call(
          'XADD',
          physical,
          '*',
          ...encodePayload(data, h, { id, replyTo: this.replyStream }),
        ),
      );
      this.maybeTrim(physical);
    };
    // A serializer that throws or rejects fails this request (its Observable errors).
    write().catch((err: unknown) => this.settle(id, { err, isDisposed: true }));
    return () => {
      const request = this.requests.get(id);
      if (request) clearTimeout(request.timer);
      this.requests.delete(id);
    };
  }

  /**
   * The serialized packet as written: data, headers (the packet's metadata, NestJS 12, merged
   * under a RedisStreamsRecord's headers) and partition key. A Promise when the serializer is
   * asynchronous (NestJS 12 allows it); a synchronous one keeps the write in the same tick.
   */
  private serialize(packet: ReadPacket): OutgoingMessage | Promise<OutgoingMessage> {
    const serialized = this.serializer.serialize(packet) as unknown;
    return serialized instanceof Promise
      ? serialized.then((s) => toOutgoing(packet, s))
      : toOutgoing(packet, serialized);
  }

  private settle(id: string, packet: WritePacket): void {
    const request = this.requests.get(id);
    if (!request) return; // timed out, or unsubscribed
    this.requests.delete(id);
    clearTimeout(request.timer);
    request.callback({ ...packet, isDisposed: true });
  }

  /**
   * Creates the reply stream with its marker (servers reply only into marked streams), or renews
   * it, so that it outlives every request sent until the next renewal by at least
   * REPLY_STREAM_IDLE_TTL_MS / 2. Requests share one renewal per REPLY_STREAM_IDLE_TTL_MS / 2.
   */
  private renewReplyStream(client: Client): Promise<void> {
    const now = performance.now(); // monotonic: a clock change can't skip a renewal
    const last = this.replyStreamRenewal;
    if (last && now < last.until) return last.done;
    const ttlMs = (this.options.replyTimeoutMs ?? 30_000) + REPLY_STREAM_IDLE_TTL_MS;
    const done = client
      .sbaReplyStream(this.replyStream, REPLY_STREAM_MARKER, String(ttlMs))
      .then(() => undefined);
    const renewal = { until: now + REPLY_STREAM_IDLE_TTL_MS / 2, done };
    this.replyStreamRenewal = renewal;
    done.catch(() => {
      if (this.replyStreamRenewal === renewal) this.replyStreamRenewal = null;
    });
    return done;
  }

  /** One blocking connection per client, started by the first request. */
  private startReplyReader(client: Client): void {
    if (this.replyReader) return;
    const reader = (client as unknown as { duplicate(): Redis | Cluster }).duplicate();
    this.replyReader = reader;
    this.replyLoop = this.readReplies(reader, client);
  }

  private async readReplies(reader: Redis | Cluster, commands: Client): Promise<void> {
    let last = '0-0';
    while (!this.isManuallyClosed) {
      let reply: [string, [string, string[]][]][] | null;
      try {
        reply = (await reader.call(
          'XREAD',
          'COUNT',
          500,
          'BLOCK',
          1000,
          'STREAMS',
          this.replyStream,
          last,
        )) as [string, [string, string[]][]][] | null;
      } catch (err) {
        if (this.isManuallyClosed) return;
        this.logger.warn(`Reading replies failed: ${describeError(err)}`);
        await new Promise((r) => setTimeout(r, 500));
        continue;
      }
      if (!reply) continue;
      const entries = reply[0]?.[1] ?? [];
      for (const [entryId, fields] of entries) {
        last = entryId;
        const decoded = decodeEntry(fields);
        if (!decoded.ok) {
          this.logger.warn(`Malformed reply ${entryId} on ${this.replyStream}: ${decoded.error}`);
          continue;
        }
        let packet: WritePacket & { id: string };
        try {
          // Nest's Deserializer may be asynchronous; one that throws must not end this loop.
          packet = (await this.deserializer.deserialize(decoded.payload)) as WritePacket & {
            id: string;
          };
        } catch (err) {
          this.logger.warn(
            `Deserializing reply ${entryId} on ${this.replyStream} failed: ${describeError(err)}`,
          );
          continue;
        }
        this.settle(packet.id, { err: packet.err, response: packet.response, isDisposed: true });
      }
      if (entries.length > 0)
        commands
          .xdel(this.replyStream, ...entries.map(([entryId]) => entryId))
          .catch(() => undefined);
    }
  }

  private maybeTrim(stream: string): void {
    let { maxLen } = this.options;
    if (maxLen === undefined) return;
    // A partition (the stream a partitioned stream's message went to) keeps maxLen / partitions.
    const partitions = this.router.layout.locate(stream)?.partitions;
    if (partitions !== undefined) maxLen = Math.ceil(maxLen / partitions);
    const every = Math.max(1, this.options.trimEvery ?? Math.floor(maxLen / 10));
    const count = (this.emitsSinceTrim.get(stream) ?? 0) + 1;
    if (count < every) {
      this.emitsSinceTrim.set(stream, count);
      return;
    }
    this.emitsSinceTrim.set(stream, 0);
    const run = this.trim(stream, maxLen)
      .catch((err) => this.logger.warn(`Trimming "${stream}" failed: ${describeError(err)}`))
      .finally(() => this.trims.delete(run));
    this.trims.add(run);
  }
}

/** The headers of a message to a partitioned stream carry its partition key (the consumers keep its order). */
function withPartitionKey(
  headers: Headers | undefined,
  key: string | undefined,
): Headers | undefined {
  return key === undefined ? headers : { ...headers, [PARTITION_KEY_HEADER]: key };
}
