/*
 * The benchmark's application: one Nest application context per process, with a provider whose
 * methods, named after the patterns, are the patterns under test. Library patterns are decorated
 * methods; `distlock-poll` and `xfetch-uncoalesced` are bench-local reference implementations
 * (plain ioredis) of the article's polling lock and of the paper's plain XFetch, because the
 * library deliberately has neither, and `bento-like` is a plain L1 + L2 cache-aside (an
 * in-process LRU in front of Redis GET/SET) as a reference for the library's L1 tier.
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
import type { MethodMetrics } from '@nest-redis-resilience/stampede';
import { shouldRecomputeEarly } from '../../libs/stampede/src/core/xfetch';
import {
  BackendError,
  BenchConfig,
  callContext,
  counters,
  lockKey,
  LOCAL_PATTERNS,
  PatternCounters,
  PatternName,
  valueKey,
} from './patterns';

/** Entries of the bench-local `bento-like` L1 (the library's `l1: true` default). */
const BENTO_L1_ENTRIES = 10_000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const isLocal = (p: PatternName) => (LOCAL_PATTERNS as readonly string[]).includes(p);

/** The fake database: sleeps `backendMs`, counts its calls per pattern, fails at `failRate`. */
export class Backend {
  readonly calls = new Map<PatternName, number>();
  /** With recordLoads: every loader call (key, performance.now() at its start), in start order. */
  readonly log: { key: string; at: number }[] = [];
  /** Loads that threw (their ids are 1..failures). */
  failures = 0;

  constructor(private readonly cfg: BenchConfig) {}

  async load(pattern: PatternName, key: string): Promise<string> {
    this.calls.set(pattern, (this.calls.get(pattern) ?? 0) + 1);
    const record = callContext.getStore();
    if (this.cfg.recordLoads) this.log.push({ key, at: performance.now() });
    try {
      await sleep(this.cfg.backendMs);
      if (this.cfg.failRate && Math.random() < this.cfg.failRate)
        throw new BackendError(++this.failures);
      return `value of ${key}`;
    } finally {
      if (record) record.loadEnd = performance.now();
    }
  }
}

/** The bench-local patterns' value in Redis: value, ms the load took (d), expiry (e, epoch ms). */
interface LocalEnvelope {
  v: string;
  d: number;
  e: number;
}

/** The Nest module of one configuration (TTLs are decorator arguments, fixed per class). */
function buildBenchModule(cfg: BenchConfig) {
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
    /** bento-like's in-process tier: key -> envelope text and expiry; Map order = LRU order. */
    readonly bento = new Map<string, { raw: string; e: number }>();

    // The unprotected baseline: single-flight, the default of a cached method, turned off.
    @Cacheable({ key, ttl, singleFlight: false })
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

    // The lock alone, as the article measures it (no in-process single-flight).
    @Cacheable({ key, ttl, singleFlight: false })
    @DistLock(lock)
    async distlock(k: string): Promise<string> {
      return backend.load('distlock', k);
    }

    @Cacheable({ key, ttl })
    @SingleFlight()
    @DistLock(lock)
    async 'two-tier'(k: string): Promise<string> {
      return backend.load('two-tier', k);
    }

    @Cacheable({ key, ttl })
    @SingleFlight()
    @XFetch(cfg.beta)
    @DistLock(lock)
    async 'two-tier-xfetch'(k: string): Promise<string> {
      return backend.load('two-tier-xfetch', k);
    }

    @Cacheable({ key, ttl, grace: cfg.graceMs ?? 10_000, graceBackoff: cfg.graceBackoffMs })
    @SingleFlight()
    @DistLock(lock)
    async 'two-tier-grace'(k: string): Promise<string> {
      return backend.load('two-tier-grace', k);
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
    async 'distlock-poll'(k: string): Promise<string> {
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
    async 'xfetch-uncoalesced'(k: string): Promise<string> {
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

    /**
     * A plain two-level cache-aside (bench-local, NOT the library; the shape of bentocache's
     * L1 + L2 without its locks and bus): an LRU Map in this process, entries kept until the
     * value's expiry and decoded on each hit, in front of Redis GET/SET. An L1 miss GETs Redis
     * (a value found there goes to L1 until its own expiry); a Redis miss loads and SETs.
     */
    async 'bento-like'(k: string): Promise<string> {
      const c = this.counters('bento-like');
      c.calls++;
      const held = this.bento.get(k);
      if (held) {
        this.bento.delete(k);
        if (held.e > Date.now()) {
          this.bento.set(k, held); // most recently used last
          c.hits++;
          c.l1Hits++;
          return (JSON.parse(held.raw) as LocalEnvelope).v;
        }
      }
      const raw = await this.redis.get(valueKey(cfg.prefix, k));
      if (raw !== null) {
        const env = JSON.parse(raw) as LocalEnvelope;
        if (env.e > Date.now()) {
          this.bentoSet(k, raw, env.e);
          c.hits++;
          return env.v;
        }
      }
      c.misses++;
      return this.loadAndSet('bento-like', k);
    }

    bentoSet(k: string, raw: string, e: number): void {
      this.bento.delete(k);
      this.bento.set(k, { raw, e });
      if (this.bento.size > BENTO_L1_ENTRIES)
        this.bento.delete(this.bento.keys().next().value as string);
    }

    async loadAndSet(pattern: PatternName, k: string): Promise<string> {
      const started = Date.now();
      const v = await backend.load(pattern, k);
      const now = Date.now();
      const text = JSON.stringify({ v, d: now - started, e: now + ttl } satisfies LocalEnvelope);
      if (pattern === 'bento-like') this.bentoSet(k, text, now + ttl);
      await this.redis.set(valueKey(cfg.prefix, k), text, 'PX', ttl);
      return v;
    }

    counters(pattern: PatternName): PatternCounters {
      let c = this.local.get(pattern);
      if (!c) this.local.set(pattern, (c = counters()));
      return c;
    }

    async onApplicationShutdown(): Promise<void> {
      await this.redis.quit();
    }
  }

  @Module({
    imports: [
      StampedeModule.forRoot({
        redis: cfg.redisUrl,
        keyPrefix: cfg.prefix,
        operationTimeout: cfg.operationTimeout,
        cooldown: cfg.cooldown,
        ...cfg.moduleOptions,
      }),
    ],
    providers: [BenchPatterns],
  })
  class BenchModule {}

  return { BenchModule, BenchPatterns };
}

type Patterns = InstanceType<ReturnType<typeof buildBenchModule>['BenchPatterns']>;

/** One process's application context and a uniform way to call and observe each pattern. */
export class BenchApp {
  private constructor(
    private readonly app: INestApplicationContext,
    private readonly patterns: Patterns,
    private readonly stampede: StampedeService,
  ) {}

  /** `logger`: the Nest logger of the app (default: Nest's console logger, errors and warnings). */
  static async create(cfg: BenchConfig, logger?: LoggerService): Promise<BenchApp> {
    const { BenchModule, BenchPatterns } = buildBenchModule(cfg);
    const app = await NestFactory.createApplicationContext(BenchModule, {
      logger: logger ?? ['error', 'warn'],
    });
    return new BenchApp(app, app.get(BenchPatterns), app.get(StampedeService));
  }

  /** Runs `fn` with a new app, closed when it ends. */
  static async with<T>(
    cfg: BenchConfig,
    fn: (app: BenchApp) => Promise<T>,
    logger?: LoggerService,
  ): Promise<T> {
    const app = await BenchApp.create(cfg, logger);
    try {
      return await fn(app);
    } finally {
      await app.close();
    }
  }

  get backend(): Backend {
    return this.patterns.backend;
  }

  caller(pattern: PatternName): (key: string) => Promise<string> {
    return (k) => this.patterns[pattern](k);
  }

  counters(pattern: PatternName): PatternCounters {
    const loads = this.backend.calls.get(pattern) ?? 0;
    if (isLocal(pattern)) return { ...this.patterns.counters(pattern), loads };
    return { ...counters(this.stampede.metrics()[`BenchPatterns.${pattern}`]), loads };
  }

  /**
   * The pattern's live counters, read around the synchronous part of a call (a join is counted
   * before the call's first await): the library's own MethodMetrics object (not a snapshot, so
   * reading it costs nothing), or the bench-local counters.
   */
  liveCounters(pattern: PatternName): Pick<PatternCounters, 'joins' | 'l1Hits'> | undefined {
    if (isLocal(pattern)) return this.patterns.counters(pattern);
    const engine = (this.stampede as unknown as { engine?: { metrics?: unknown } }).engine;
    const registry = engine?.metrics as { for?: (name: string) => MethodMetrics } | undefined;
    return registry?.for?.(`BenchPatterns.${pattern}`);
  }

  private lockWaitsWatched = false;

  /**
   * Marks the CallRecord of a call whose read-or-lock step finds another holder's lock ('busy':
   * the call then waits for that holder's load), by wrapping readOrLock on this app's store
   * instance (the library is not changed).
   */
  watchLockWaits(): void {
    if (this.lockWaitsWatched) return;
    this.lockWaitsWatched = true;
    const store = this.stampede.store;
    const readOrLock = store.readOrLock.bind(store);
    store.readOrLock = async <T>(key: string, token: string, ttl: number, waiting?: boolean) => {
      const step = await readOrLock<T>(key, token, ttl, waiting);
      const record = callContext.getStore();
      if (record && step.kind === 'busy') record.lockWait = true;
      return step;
    };
  }

  /** Fill notifications the store has received (undefined: this library has no counter). */
  notificationsReceived(): number | undefined {
    const n = (this.stampede.store as unknown as { notificationsReceived?: unknown })
      .notificationsReceived;
    return typeof n === 'number' ? n : undefined;
  }

  close(): Promise<void> {
    return this.app.close();
  }
}
