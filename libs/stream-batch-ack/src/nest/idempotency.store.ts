import { Inject, Injectable, OnModuleDestroy, Optional } from '@nestjs/common';
import { Redis, RedisOptions } from 'ioredis';
import { randomUUID } from 'node:crypto';
import { LruCache } from '../core/lru-cache';
import { closeClient, createRedisClient } from '../redis/connection';
import { DEFAULT_IDEMPOTENCY_PREFIX } from '../redis/keys';
import { IDEMPOTENCY_RELEASE_LUA } from '../redis/scripts';
import { REDIS_STREAMS_MODULE_OPTIONS } from './redis-streams.constants';

export interface IdempotencyOptions {
  /** L2: a Redis shared by all consumers (`SET NX PX`). Without it only the in-process L1 is used. */
  redis?: string | RedisOptions | Redis;
  /** Prefix of the L2 keys. Default 'sba:idem:'. */
  keyPrefix?: string;
  /** L1 size bound. Default 100_000. */
  maxSize?: number;
  /** Default time a processed key is remembered, in ms. Default 60_000. */
  ttlMs?: number;
  /** Default time an in-progress key blocks others if its consumer dies, in ms. Default 30_000. */
  lockMs?: number;
}

export type IdempotencyState = 'acquired' | 'processing' | 'done';

const DONE = 'done';
/** Tokens of an L1-only store need only be unique within the process. */
let localTokens = 0;

/** L1 (in-process LRU with TTL) in front of an optional L2 (Redis), keyed by idempotency key. */
@Injectable()
export class IdempotencyStore implements OnModuleDestroy {
  private readonly l1: LruCache<string>;
  private readonly redis: Redis | null;
  private readonly ownsRedis: boolean;
  readonly keyPrefix: string;
  readonly ttlMs: number;
  readonly lockMs: number;

  constructor(
    @Optional()
    @Inject(REDIS_STREAMS_MODULE_OPTIONS)
    moduleOptions?: {
      idempotency?: IdempotencyOptions;
    },
  ) {
    const options = moduleOptions?.idempotency ?? {};
    this.ttlMs = options.ttlMs ?? 60_000;
    this.lockMs = options.lockMs ?? 30_000;
    this.keyPrefix = options.keyPrefix ?? DEFAULT_IDEMPOTENCY_PREFIX;
    this.l1 = new LruCache<string>({ maxSize: options.maxSize ?? 100_000, ttlMs: this.ttlMs });
    if (options.redis instanceof Redis) {
      this.redis = options.redis;
      this.ownsRedis = false;
    } else if (options.redis !== undefined) {
      this.redis = createRedisClient(options.redis, {});
      this.ownsRedis = true;
    } else {
      this.redis = null;
      this.ownsRedis = false;
    }
    this.redis?.defineCommand('sbaIdemRelease', { numberOfKeys: 1, lua: IDEMPOTENCY_RELEASE_LUA });
  }

  get hasL2(): boolean {
    return this.redis !== null;
  }

  /** Tries to start processing `key`; a token is returned with 'acquired'. */
  async begin(
    key: string,
    lockMs = this.lockMs,
  ): Promise<{ state: IdempotencyState; token?: string }> {
    const local = this.l1.get(key);
    if (local === DONE) return { state: 'done' };
    if (local !== undefined) return { state: 'processing' };
    if (!this.redis) {
      const token = `p:${++localTokens}`;
      this.l1.set(key, token, lockMs);
      return { state: 'acquired', token };
    }
    const token = `p:${randomUUID()}`;
    this.l1.set(key, token, lockMs);
    try {
      const ok = await this.redis.set(this.keyPrefix + key, token, 'PX', lockMs, 'NX');
      if (ok === 'OK') return { state: 'acquired', token };
      const value = await this.redis.get(this.keyPrefix + key);
      this.l1.delete(key);
      if (value === DONE) {
        this.l1.set(key, DONE, this.ttlMs);
        return { state: 'done' };
      }
      return { state: 'processing' };
    } catch (err) {
      this.l1.delete(key);
      throw err;
    }
  }

  /** Marks `key` processed successfully. */
  async complete(key: string, ttlMs = this.ttlMs): Promise<void> {
    this.l1.set(key, DONE, ttlMs);
    if (this.redis) await this.redis.set(this.keyPrefix + key, DONE, 'PX', ttlMs);
  }

  /** Forgets `key` after a failure, so that a retry runs. */
  async fail(key: string, token?: string): Promise<void> {
    this.l1.delete(key);
    if (this.redis && token) await (this.redis as any).sbaIdemRelease(this.keyPrefix + key, token);
  }

  async onModuleDestroy(): Promise<void> {
    if (this.redis && this.ownsRedis) {
      await closeClient(this.redis);
    }
  }
}
