import { Logger } from '@nestjs/common';
import { ClientProxy, ReadPacket, WritePacket } from '@nestjs/microservices';
import type { Redis } from 'ioredis';
import { encodePayload } from '../core/entry-codec';
import { describeError, NotInitializedError, NotSupportedError } from '../core/errors';
import { closeClient, createRedisClient } from '../redis/connection';
import { defineStreamScripts, StreamScripts } from '../redis/scripts';
import {
  RedisStreamsEvents,
  RedisStreamsEventsMap,
  RedisStreamsStatus,
} from './redis-streams.events';
import { RedisStreamsClientOptions } from './redis-streams.options';

/**
 * The producer side: `emit(stream, data)` appends `data` as JSON in the `data` field of a new
 * entry (XADD). Emits issued in the same tick go out as one pipeline. With `maxLen`, streams are
 * trimmed without deleting entries that a consumer group has not acknowledged.
 */
export class ClientRedisStreams extends ClientProxy<RedisStreamsEvents> {
  protected readonly logger = new Logger(ClientRedisStreams.name);
  protected client: (Redis & StreamScripts) | null = null;
  protected connectionPromise: Promise<void> | null = null;
  protected isManuallyClosed = false;
  private pendingEventListeners: {
    event: keyof RedisStreamsEvents;
    callback: (...args: any[]) => void;
  }[] = [];
  private readonly emitsSinceTrim = new Map<string, number>();
  private readonly trims = new Set<Promise<unknown>>();

  constructor(protected readonly options: RedisStreamsClientOptions) {
    super();
    this.initializeSerializer(options as any);
    this.initializeDeserializer(options as any);
  }

  async connect(): Promise<any> {
    if (this.client) return this.connectionPromise;
    this.isManuallyClosed = false;
    const userRetry =
      typeof this.options.connection === 'object'
        ? this.options.connection.retryStrategy
        : undefined;
    const client = defineStreamScripts(
      createRedisClient(this.options.connection, {
        lazyConnect: true,
        enableAutoPipelining: true,
        retryStrategy: (times: number) => {
          if (this.isManuallyClosed) return null;
          return userRetry ? userRetry(times) : Math.min(times * 50, 2000);
        },
      }),
    );
    client.on(RedisStreamsEventsMap.ERROR, (err: Error) => {
      if (!this.isManuallyClosed) this.logger.error(`Redis client connection: ${err.message}`);
    });
    client.on(RedisStreamsEventsMap.RECONNECTING, () => {
      if (!this.isManuallyClosed) this._status$.next(RedisStreamsStatus.RECONNECTING);
    });
    client.on(RedisStreamsEventsMap.READY, () => this._status$.next(RedisStreamsStatus.CONNECTED));
    client.on(RedisStreamsEventsMap.END, () => this._status$.next(RedisStreamsStatus.DISCONNECTED));
    for (const { event, callback } of this.pendingEventListeners)
      client.on(event, (...args: unknown[]) => callback('client', ...args));
    this.pendingEventListeners = [];
    this.client = client;
    this.connectionPromise = client.connect().catch((err) => {
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
    await Promise.allSettled([...this.trims]);
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
    const [deleted] = await this.unwrap<Redis & StreamScripts>().sbaSafeTrim(
      stream,
      String(maxLen),
    );
    return Number(deleted);
  }

  protected async dispatchEvent<T = any>(packet: ReadPacket): Promise<T> {
    const stream = this.normalizePattern(packet.pattern);
    const serialized = this.serializer.serialize(packet) as ReadPacket;
    const client = this.unwrap<Redis>();
    const id = (await client.call(
      'XADD',
      stream,
      '*',
      ...encodePayload(serialized.data),
    )) as string;
    this.maybeTrim(stream);
    return id as T;
  }

  protected publish(_packet: ReadPacket, callback: (packet: WritePacket) => void): () => void {
    callback({
      err: new NotSupportedError(
        'ClientRedisStreams only supports emit() (events); send() (request-response) is not available over Redis Streams.',
      ),
      isDisposed: true,
    });
    return () => undefined;
  }

  private maybeTrim(stream: string): void {
    const { maxLen } = this.options;
    if (maxLen === undefined) return;
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
