/*
 * The benchmark's application: one Nest application context per process, with a provider whose
 * methods are the patterns under test. Library patterns are decorated methods (the library wraps
 * them at start-up); `distlock-poll` and `xfetch-uncoalesced` are bench-local reference
 * implementations (plain ioredis) of the article's polling lock and of the paper's plain XFetch,
 * because the library deliberately has neither.
 */
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Injectable, Module, OnApplicationShutdown } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { INestApplicationContext, LoggerService } from '@nestjs/common';
import { Redis } from 'ioredis';
import {
  Cacheable,
  DistLock,
  JitterTtl,
  SingleFlight,
  StampedeModule,
  StampedeService,
  XFetch,
} from '@nest-redis-resilience/stampede';
import { shouldRecomputeEarly } from '../../libs/stampede/src/core/xfetch';

export const LIBRARY_PATTERNS = [
  'naive',
  'singleflight',
  'xfetch',
  'distlock',
  'two-tier',
  'two-tier-xfetch',
  'jitter',
] as const;
export const LOCAL_PATTERNS = ['distlock-poll', 'xfetch-uncoalesced'] as const;
export type PatternName = (typeof LIBRARY_PATTERNS)[number] | (typeof LOCAL_PATTERNS)[number];
export const ALL_PATTERNS: PatternName[] = [...LIBRARY_PATTERNS, ...LOCAL_PATTERNS];

/** The decorated method behind each library pattern (metrics are named `BenchPatterns.<method>`). */
const METHOD: Record<PatternName, string> = {
  naive: 'naive',
  singleflight: 'singleflight',
  xfetch: 'xfetch',
  distlock: 'distlock',
  'two-tier': 'twoTier',
  'two-tier-xfetch': 'twoTierXfetch',
  jitter: 'jitter',
  'distlock-poll': 'distlockPoll',
  'xfetch-uncoalesced': 'xfetchUncoalesced',
};

export interface BenchConfig {
  redisUrl: string;
  /** Every key of the run starts with it (library values, locks, bench-local keys). */
  prefix: string;
  ttlMs: number;
  backendMs: number;
  lockTtlMs: number;
  pollMs: number;
  beta: number;
  jitter: number;
  /** Record the time of every loader call (snowstorm). */
  recordLoadTimes?: boolean;
  /** Record the key and start time of every loader call (double refreshes, loads per key). */
  recordLoads?: boolean;
  /** Share of loader calls that throw (after the backend time), 0 to 1 (warnings scenario). */
  failRate?: number;
  /** StampedeModule operationTimeout (ms); the library's default when absent. */
  operationTimeout?: number;
  /** StampedeModule cooldown (ms); the library's default when absent. */
  cooldown?: number;
}

/** Counters for one pattern, read before and after a round. */
export interface PatternCounters {
  /** Loader (backend) calls. */
  loads: number;
  /** Calls that had to wait for a loader (no cached value, or the caller recomputed itself). */
  misses: number;
  /** Total ms callers spent waiting for a lock held by someone else. */
  lockWaitMs: number;
  earlyRecomputes: number;
  storeErrors: number;
  /** Library metrics (0 for the bench-local patterns). */
  calls: number;
  hits: number;
  joins: number;
  lockWaits: number;
  lockTimeouts: number;
  /** Loader errors. */
  errors: number;
}

export function emptyCounters(): PatternCounters {
  return {
    loads: 0,
    misses: 0,
    lockWaitMs: 0,
    earlyRecomputes: 0,
    storeErrors: 0,
    calls: 0,
    hits: 0,
    joins: 0,
    lockWaits: 0,
    lockTimeouts: 0,
    errors: 0,
  };
}

/** One loader call: which key, when it started (performance.now() of its process). */
export interface LoadRecord {
  key: string;
  at: number;
}

/** Error thrown by a failing load (failRate); `id` tells the bench which load it came from. */
export class BackendError extends Error {
  constructor(readonly id: number) {
    super(`backend failure #${id}`);
  }
}

export function valueKey(prefix: string, key: string): string {
  return `${prefix}{${key}}`;
}

export function lockKey(prefix: string, key: string): string {
  return `${prefix}{${key}}:lock`;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The fake database: sleeps `backendMs` and counts its calls per pattern. */
export class Backend {
  readonly calls = new Map<PatternName, number>();
  readonly times: number[] = [];
  /** With recordLoads: every loader call, in start order. */
  readonly log: LoadRecord[] = [];
  /** With failRate: how many loads threw (their ids are 1..failures). */
  failures = 0;

  constructor(private readonly cfg: BenchConfig) {}

  async load(pattern: PatternName, key: string): Promise<string> {
    this.calls.set(pattern, (this.calls.get(pattern) ?? 0) + 1);
    const now = performance.now();
    if (this.cfg.recordLoadTimes) this.times.push(now);
    if (this.cfg.recordLoads) this.log.push({ key, at: now });
    await sleep(this.cfg.backendMs);
    if (this.cfg.failRate && Math.random() < this.cfg.failRate) {
      throw new BackendError(++this.failures);
    }
    return `value of ${key}`;
  }
}

interface LocalEnvelope {
  v: string;
  /** ms the load took */
  d: number;
  /** expiry, epoch ms */
  e: number;
}

/** Builds the Nest module for one configuration (TTLs are decorator arguments, fixed per class). */
export function buildBenchModule(cfg: BenchConfig) {
  const key = (k: string) => k;
  const ttl = cfg.ttlMs;
  const lock = { ttl: cfg.lockTtlMs, poll: cfg.pollMs };
  const backend = new Backend(cfg);

  @Injectable()
  class BenchPatterns implements OnApplicationShutdown {
    readonly backend = backend;
    /** Counters of the bench-local patterns (the library keeps its own). */
    readonly local = new Map<PatternName, PatternCounters>();
    readonly redis = new Redis(cfg.redisUrl, { lazyConnect: false });

    @Cacheable({ key, ttl })
    async naive(k: string): Promise<string> {
      return backend.load('naive', k);
    }

    @Cacheable({ key, ttl })
    @SingleFlight()
    async singleflight(k: string): Promise<string> {
      return backend.load('singleflight', k);
    }

    @Cacheable({ key, ttl })
    @SingleFlight()
    @XFetch(cfg.beta)
    async xfetch(k: string): Promise<string> {
      return backend.load('xfetch', k);
    }

    @Cacheable({ key, ttl })
    @DistLock(lock)
    async distlock(k: string): Promise<string> {
      return backend.load('distlock', k);
    }

    @Cacheable({ key, ttl })
    @SingleFlight()
    @DistLock(lock)
    async twoTier(k: string): Promise<string> {
      return backend.load('two-tier', k);
    }

    /** two-tier plus XFetch: early recomputation under a try-lock (the README's full setup). */
    @Cacheable({ key, ttl })
    @SingleFlight()
    @XFetch(cfg.beta)
    @DistLock(lock)
    async twoTierXfetch(k: string): Promise<string> {
      return backend.load('two-tier-xfetch', k);
    }

    @Cacheable({ key, ttl })
    @SingleFlight()
    @JitterTtl(cfg.jitter)
    async jitter(k: string): Promise<string> {
      return backend.load('jitter', k);
    }

    /**
     * The article's distributed lock, as written there (bench-local, NOT the library): GET; on a
     * miss SET NX PX; the holder loads, SETs the value and DELs the lock; everyone else sleeps
     * `poll` ms and GETs again until the value appears. A waiter gives up after the lock TTL and
     * loads itself (the article's loop has no bound).
     */
    async distlockPoll(k: string): Promise<string> {
      const c = this.counters('distlock-poll');
      const vKey = valueKey(cfg.prefix, k);
      const hit = await this.redis.get(vKey);
      if (hit !== null) return (JSON.parse(hit) as LocalEnvelope).v;
      c.misses++;
      const lKey = lockKey(cfg.prefix, k);
      if ((await this.redis.set(lKey, randomUUID(), 'PX', cfg.lockTtlMs, 'NX')) === 'OK') {
        try {
          return await this.loadAndSet('distlock-poll', k);
        } finally {
          await this.redis.del(lKey);
        }
      }
      const started = performance.now();
      try {
        for (;;) {
          await sleep(cfg.pollMs);
          const v = await this.redis.get(vKey);
          if (v !== null) return (JSON.parse(v) as LocalEnvelope).v;
          if (performance.now() - started > cfg.lockTtlMs)
            return await this.loadAndSet('distlock-poll', k);
        }
      } finally {
        c.lockWaitMs += performance.now() - started;
      }
    }

    /**
     * XFetch in the paper's plain form (bench-local): every caller whose draw fires, or who finds
     * no value, recomputes itself and waits for it. No coalescing, no background refresh.
     */
    async xfetchUncoalesced(k: string): Promise<string> {
      const c = this.counters('xfetch-uncoalesced');
      const raw = await this.redis.get(valueKey(cfg.prefix, k));
      if (raw !== null) {
        const env = JSON.parse(raw) as LocalEnvelope;
        if (!shouldRecomputeEarly(Date.now(), env.d, cfg.beta, env.e, Math.random)) return env.v;
        c.earlyRecomputes++;
      }
      c.misses++;
      return this.loadAndSet('xfetch-uncoalesced', k);
    }

    async onApplicationShutdown(): Promise<void> {
      await this.redis.quit();
    }

    async loadAndSet(pattern: PatternName, k: string): Promise<string> {
      const started = Date.now();
      const v = await backend.load(pattern, k);
      const now = Date.now();
      const env: LocalEnvelope = { v, d: now - started, e: now + ttl };
      await this.redis.set(valueKey(cfg.prefix, k), JSON.stringify(env), 'PX', ttl);
      return v;
    }

    counters(pattern: PatternName): PatternCounters {
      let c = this.local.get(pattern);
      if (!c) {
        c = emptyCounters();
        this.local.set(pattern, c);
      }
      return c;
    }
  }

  @Module({
    imports: [
      StampedeModule.forRoot({
        redis: cfg.redisUrl,
        keyPrefix: cfg.prefix,
        operationTimeout: cfg.operationTimeout,
        cooldown: cfg.cooldown,
      }),
    ],
    providers: [BenchPatterns],
  })
  class BenchModule {}

  return { BenchModule, BenchPatterns };
}

/** One process's application context and a uniform way to call and observe each pattern. */
export class BenchApp {
  private constructor(
    private readonly app: INestApplicationContext,
    private readonly patterns: {
      backend: Backend;
      local: Map<PatternName, PatternCounters>;
      counters(p: PatternName): PatternCounters;
    } & Record<string, unknown>,
    private readonly stampede: StampedeService,
  ) {}

  /** `logger`: the Nest logger of the app (default: Nest's console logger, errors and warnings). */
  static async create(cfg: BenchConfig, logger?: LoggerService): Promise<BenchApp> {
    const { BenchModule, BenchPatterns } = buildBenchModule(cfg);
    const app = await NestFactory.createApplicationContext(BenchModule, {
      logger: logger ?? ['error', 'warn'],
    });
    const patterns = app.get(BenchPatterns) as unknown as BenchApp['patterns'];
    return new BenchApp(app, patterns, app.get(StampedeService));
  }

  get backend(): Backend {
    return this.patterns.backend;
  }

  /** A function that calls the pattern's method on the provider instance. */
  caller(pattern: PatternName): (key: string) => Promise<string> {
    const target = this.patterns as unknown as Record<string, (k: string) => Promise<string>>;
    const method = METHOD[pattern];
    return (k) => target[method](k);
  }

  counters(pattern: PatternName): PatternCounters {
    const loads = this.patterns.backend.calls.get(pattern) ?? 0;
    if ((LOCAL_PATTERNS as readonly string[]).includes(pattern)) {
      return { ...this.patterns.counters(pattern), loads };
    }
    const m = this.stampede.metrics()[`BenchPatterns.${METHOD[pattern]}`];
    if (!m) return { ...emptyCounters(), loads };
    return {
      loads,
      misses: m.misses,
      lockWaitMs: m.lockWaitMs,
      earlyRecomputes: m.earlyRecomputes,
      storeErrors: m.storeErrors,
      calls: m.calls,
      hits: m.hits,
      joins: m.joins,
      lockWaits: m.lockWaits,
      lockTimeouts: m.lockTimeouts,
      errors: m.errors,
    };
  }

  /**
   * Fill notifications the app's RedisStore has received since start-up: its public getter
   * `notificationsReceived`, or undefined when the library in this checkout has none.
   */
  notificationsReceived(): number | undefined {
    const n = (this.stampede.store as unknown as { notificationsReceived?: unknown })
      .notificationsReceived;
    return typeof n === 'number' ? n : undefined;
  }

  close(): Promise<void> {
    return this.app.close();
  }
}

export function diffCounters(after: PatternCounters, before: PatternCounters): PatternCounters {
  const out = emptyCounters();
  for (const k of Object.keys(out) as (keyof PatternCounters)[]) out[k] = after[k] - before[k];
  return out;
}

export function sumCounters(list: PatternCounters[]): PatternCounters {
  const out = emptyCounters();
  for (const c of list)
    for (const k of Object.keys(out) as (keyof PatternCounters)[]) out[k] += c[k];
  return out;
}
