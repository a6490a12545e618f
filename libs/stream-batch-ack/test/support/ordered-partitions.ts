/*
 * Helpers of the ordered-partitions specs (ordering: 'key'): a controller per logical stream, a
 * log of handler runs that flags two runs of one key (or of one partition on two consumers) at
 * once, an ownership watch (events and server.ownedPartitions()), and the per-key order check.
 */
import { Controller, INestMicroservice, Type } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import type { Cluster, Redis } from 'ioredis';
import { firstValueFrom } from 'rxjs';
import {
  ClientRedisStreams,
  IDEMPOTENT_EFFECT_LUA,
  RedisStreamsContext,
  RedisStreamsModule,
  RedisStreamsServerOptions,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import { sleep } from './helpers';

/** The payload of every message: its key, and its number among the messages of its key. */
export interface KeyedMessage {
  key: string;
  seq: number;
}

export const keyName = (i: number): string => `key-${String(i).padStart(3, '0')}`;

/** Emits seq `from` .. `to - 1` of every key, one round per seq (the keys of a round at once). */
export async function emitRounds(
  client: ClientRedisStreams,
  stream: string,
  keys: readonly string[],
  from: number,
  to: number,
): Promise<void> {
  for (let seq = from; seq < to; seq++)
    await Promise.all(keys.map((key) => firstValueFrom(client.emit(stream, { key, seq }))));
}

/** A controller whose handler of `stream` (per message) calls `handle`. */
export function orderedController(
  stream: string,
  handle: (msg: KeyedMessage, ctx: RedisStreamsContext) => Promise<void>,
): Type<unknown> {
  @Controller()
  class OrderedController {
    @StreamEventPattern(stream)
    async handle(@Payload() msg: KeyedMessage, @Ctx() ctx: RedisStreamsContext) {
      await handle(msg, ctx);
    }
  }
  return OrderedController;
}

/** Starts a Nest microservice on a ServerRedisStreams; `beforeListen` sees the server first (events). */
export async function startConsumer(
  controller: Type<unknown>,
  options: RedisStreamsServerOptions,
  beforeListen?: (server: ServerRedisStreams) => void,
): Promise<{ app: INestMicroservice; server: ServerRedisStreams }> {
  const moduleRef = await Test.createTestingModule({
    imports: [RedisStreamsModule.forRoot()], // handlers' errors reach the dead letters as thrown
    controllers: [controller],
  }).compile();
  const server = new ServerRedisStreams(options);
  beforeListen?.(server);
  const app = moduleRef.createNestMicroservice({ strategy: server, logger: false });
  await app.listen();
  return { app, server };
}

/** The script of an effect made atomic with the entry's idempotency done mark: HINCRBY effects field. */
export const APPLY_EFFECT_LUA = `${IDEMPOTENT_EFFECT_LUA}
if sba_take(KEYS[1], ARGV[1], ARGV[2]) then return redis.call('HINCRBY', KEYS[2], ARGV[3], 1) end
return 0`;

export type EffectClient<T extends Redis | Cluster = Redis | Cluster> = T & {
  applyEffect(
    record: string,
    effects: string,
    token: string,
    ttlMs: number,
    field: string,
  ): Promise<number>;
};

/** Adds `applyEffect` (APPLY_EFFECT_LUA) to a client. */
export function withEffect<T extends Redis | Cluster>(client: T): EffectClient<T> {
  client.defineCommand('applyEffect', { numberOfKeys: 2, lua: APPLY_EFFECT_LUA });
  return client as EffectClient<T>;
}

export interface HandlerRun extends KeyedMessage {
  consumer: string;
  partition: number | undefined;
  deliveries: number;
}

/**
 * Every handler run of the consumers of this process, in the order they started (JavaScript runs
 * one at a time, so this is the real order). `problems` names each run that started while another
 * run of its key was running, while another consumer was running an entry of its partition, or on
 * a consumer that did not own its partition.
 */
export class HandlerRunLog {
  readonly runs: HandlerRun[] = [];
  readonly problems: string[] = [];
  private readonly runningKeys = new Map<string, HandlerRun>();
  private readonly runningPartitions = new Map<number, Map<string, number>>();

  /** Records the start of a run; call the returned function when it ends (in `finally`). */
  start(run: HandlerRun, ownedNow: readonly number[]): () => void {
    const what = `${run.key}/${run.seq} on ${run.consumer}`;
    const other = this.runningKeys.get(run.key);
    if (other)
      this.problems.push(
        `${what} started while ${other.key}/${other.seq} ran on ${other.consumer}`,
      );
    if (run.partition === undefined) this.problems.push(`${what} has no partition`);
    else {
      if (!ownedNow.includes(run.partition))
        this.problems.push(
          `${what} started on partition ${run.partition}, not owned (ownedPartitions: [${ownedNow}])`,
        );
      let running = this.runningPartitions.get(run.partition);
      if (!running) this.runningPartitions.set(run.partition, (running = new Map()));
      for (const [consumer, n] of running)
        if (consumer !== run.consumer && n > 0)
          this.problems.push(`${what} started while ${consumer} ran partition ${run.partition}`);
      running.set(run.consumer, (running.get(run.consumer) ?? 0) + 1);
    }
    this.runs.push(run);
    this.runningKeys.set(run.key, run);
    return () => {
      if (this.runningKeys.get(run.key) === run) this.runningKeys.delete(run.key);
      if (run.partition !== undefined) {
        const running = this.runningPartitions.get(run.partition)!;
        running.set(run.consumer, running.get(run.consumer)! - 1);
      }
    };
  }

  /** Runs of one message (key, seq). */
  runsOf(key: string, seq: number): HandlerRun[] {
    return this.runs.filter((r) => r.key === key && r.seq === seq);
  }
}

/**
 * The per-key order check, on the runs in the order they started: each key's messages
 * 0 .. perKey - 1 all ran, and the first run of each came in seq order. A message that runs
 * again must be one `mayRunAgain` accepts (e.g. one the killed consumer had started); otherwise
 * a second run is a problem too. Returns the problems, the first 20 (empty: order kept, nothing
 * missing).
 */
export function orderProblems(
  runs: readonly { key: string; seq: number; consumer: string }[],
  keys: readonly string[],
  perKey: number,
  mayRunAgain: (earlier: readonly string[], key: string, seq: number) => boolean = () => false,
): string[] {
  const problems: string[] = [];
  const next = new Map(keys.map((k) => [k, 0]));
  const ranOn = new Map<string, string[]>(); // `${key}/${seq}` -> consumers of its runs so far
  for (const run of runs) {
    const id = `${run.key}/${run.seq}`;
    const expected = next.get(run.key);
    if (expected === undefined) {
      problems.push(`unknown key ${run.key}`);
      continue;
    }
    const earlier = ranOn.get(id) ?? [];
    if (run.seq === expected) next.set(run.key, expected + 1);
    else if (run.seq > expected)
      problems.push(`${id} ran (on ${run.consumer}) before ${run.key}/${expected}`);
    else if (earlier.length === 0) problems.push(`${id} ran after ${run.key}/${expected - 1}`);
    else if (!mayRunAgain(earlier, run.key, run.seq))
      problems.push(`${id} ran again on ${run.consumer} (before on ${earlier.join(', ')})`);
    ranOn.set(id, [...earlier, run.consumer]);
  }
  for (const [key, n] of next)
    if (n < perKey) problems.push(`${key}: ${perKey - n} of ${perKey} never ran (from seq ${n})`);
  return firstOf(problems);
}

/** The first 20 problems, and how many more there are. */
export function firstOf(problems: string[], max = 20): string[] {
  return problems.length <= max
    ? problems
    : [...problems.slice(0, max), `... and ${problems.length - max} more`];
}

export interface OwnershipEvent {
  type: 'assigned' | 'released' | 'lost';
  consumer: string;
  partition: number;
  takenOver?: number;
  reason?: string;
  at: number;
}

/**
 * What the consumers of this process say they own: their partition events in the order they came
 * (an event is emitted when a consumer's view changes, so a partition must be released or lost by
 * its owner before it is assigned to another), and snapshots of `server.ownedPartitions()`.
 * `problems` lists every partition that two consumers held at once, by either.
 */
export class OwnershipWatch {
  readonly events: OwnershipEvent[] = [];
  readonly problems: string[] = [];
  private readonly owner = new Map<number, string>();
  private readonly servers = new Map<string, ServerRedisStreams>();

  constructor(
    private readonly stream: string,
    private readonly partitions: number,
  ) {}

  /** Listens to the partition events of `server` (call before listen()) and includes it in snapshots. */
  attach(server: ServerRedisStreams): void {
    const consumer = server.options.consumer;
    this.servers.set(consumer, server);
    server.events.on('redis_streams.partition.assigned', (e) => {
      if (e.stream !== this.stream) return;
      this.events.push({
        type: 'assigned',
        consumer: e.consumer,
        partition: e.partition,
        takenOver: e.takenOver,
        at: Date.now(),
      });
      const held = this.owner.get(e.partition);
      if (held !== undefined)
        this.problems.push(
          `partition ${e.partition} assigned to ${e.consumer} while ${held} held it`,
        );
      this.owner.set(e.partition, e.consumer);
    });
    const ended =
      (type: 'released' | 'lost') =>
      (e: { stream: string; partition: number; consumer: string; reason: string }) => {
        if (e.stream !== this.stream) return;
        this.events.push({
          type,
          consumer: e.consumer,
          partition: e.partition,
          reason: e.reason,
          at: Date.now(),
        });
        const held = this.owner.get(e.partition);
        if (held !== e.consumer)
          this.problems.push(
            `partition ${e.partition} ${type} by ${e.consumer}, held by ${held ?? 'nobody'}`,
          );
        else this.owner.delete(e.partition);
      };
    server.events.on('redis_streams.partition.released', ended('released'));
    server.events.on('redis_streams.partition.lost', ended('lost'));
  }

  /** Stops including `consumer` in snapshots (after its app is closed). */
  detach(consumer: string): void {
    this.servers.delete(consumer);
  }

  /** `ownedPartitions()` of every attached server now; a partition claimed by two is a problem. */
  snapshot(): Map<string, number[]> {
    const owned = new Map<string, number[]>();
    const by = new Map<number, string>();
    for (const [consumer, server] of this.servers) {
      const mine = server.ownedPartitions(this.stream);
      owned.set(
        consumer,
        [...mine].sort((a, b) => a - b),
      );
      for (const p of mine) {
        const other = by.get(p);
        if (other !== undefined)
          this.problems.push(`partition ${p} owned by ${other} and ${consumer} at once`);
        by.set(p, consumer);
      }
    }
    return owned;
  }

  /** True when the attached consumers own every partition once, spread evenly (counts differ by at most 1). */
  balanced(): boolean {
    return isBalanced(this.snapshot(), this.partitions);
  }
}

/** Every partition 0 .. partitions-1 owned once, by consumers whose counts differ by at most 1. */
export function isBalanced(
  owned: ReadonlyMap<string, readonly number[]>,
  partitions: number,
): boolean {
  const all = [...owned.values()].flat().sort((a, b) => a - b);
  if (all.length !== partitions || all.some((p, i) => p !== i)) return false;
  const counts = [...owned.values()].map((o) => o.length);
  return Math.max(...counts) - Math.min(...counts) <= 1;
}

/**
 * Consumers of one logical stream in this process, all with the same handler: it records its run
 * (HandlerRunLog), checks the `sba-partition-key` header, waits `runMs` (so that a run spans some
 * time) and applies the effect `key/seq` to the hash `effects` atomically with the idempotency done
 * mark (the servers need `idempotency: { store: 'redis' }`).
 */
export class OrderedConsumers {
  readonly log = new HandlerRunLog();
  readonly watch: OwnershipWatch;
  readonly servers = new Map<string, ServerRedisStreams>();
  readonly apps = new Map<string, INestMicroservice>();
  readonly headerProblems: string[] = [];
  private readonly controller: Type<unknown>;

  constructor(
    private readonly stream: string,
    partitions: number,
    effects: { client: EffectClient; hash: string },
    private readonly options: (consumer: string) => RedisStreamsServerOptions,
    runMs = 0,
  ) {
    this.watch = new OwnershipWatch(stream, partitions);
    this.controller = orderedController(stream, async (msg, ctx) => {
      const end = this.log.start(
        { ...msg, consumer: ctx.consumer, partition: ctx.partition, deliveries: ctx.deliveries },
        this.servers.get(ctx.consumer)!.ownedPartitions(stream),
      );
      try {
        const header = ctx.headers['sba-partition-key'];
        if (header !== msg.key) this.headerProblems.push(`${msg.key}/${msg.seq}: header ${header}`);
        if (runMs > 0) await sleep(runMs);
        const { record, token, ttlMs } = ctx.idempotency!;
        await effects.client.applyEffect(
          record,
          effects.hash,
          token,
          ttlMs,
          `${msg.key}/${msg.seq}`,
        );
      } finally {
        end();
      }
    });
  }

  async start(consumer: string): Promise<ServerRedisStreams> {
    const { app, server } = await startConsumer(this.controller, this.options(consumer), (s) => {
      this.servers.set(consumer, s);
      this.watch.attach(s);
    });
    this.apps.set(consumer, app);
    return server;
  }

  /** app.close() of one consumer; it stays in `servers` (its metrics), not in the watch's snapshots. */
  async close(consumer: string): Promise<void> {
    await this.apps.get(consumer)!.close();
    this.apps.delete(consumer);
    this.watch.detach(consumer);
  }

  async closeAll(): Promise<void> {
    for (const consumer of [...this.apps.keys()]) await this.close(consumer);
  }
}
