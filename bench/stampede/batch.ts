/*
 * The batch scenario of `npm run bench:stampede -- --scenario batch`: 100 keys, 50 of them
 * cached, asked for by 1 or 2 instances at once, with a lock per key; getOrLoadMany against
 * getOrLoad for each key, in a loop (one after the other) or all together (Promise.all, whose
 * commands share round trips). Per 100 keys: the Redis commands (INFO commandstats of a private
 * redis-server), the round trips (a proxy in front of it counts the times a connection sends
 * after its last reply, so pipelined commands count once), the loader calls and the keys loaded.
 * Each instance is a Nest application context in this process with its own Redis connections.
 * Medians over --batch-rounds rounds (default 5), a few seconds.
 */
import { NestFactory } from '@nestjs/core';
import type { INestApplicationContext } from '@nestjs/common';
import { StampedeModule, StampedeService } from '@nest-redis-resilience/stampede';
import { RoundTripProxy } from '../../support/round-trip-proxy';
import { columns } from '../shared/columns';
import type { PrivateRedis } from '../shared/private-redis';
import type { Target } from '../shared/targets';
import { commandDelta, eachOf, runScenario, ScenarioContext, totalCommands } from './scenario';

const KEYS = 100;
const CACHED = 50;
const POLICY = { ttl: 600_000, lock: { ttl: 5000 } };
const BACKEND_MS = 20;
const FLOWS = ['per-key loop', 'per-key, together', 'getOrLoadMany'] as const;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** One round: the flow on `services` (all at once) over fresh keys, half of them cached first. */
async function round(
  redis: PrivateRedis,
  proxy: RoundTripProxy,
  services: StampedeService[],
  flow: (typeof FLOWS)[number],
  tag: string,
) {
  const keys = Array.from({ length: KEYS }, (_, i) => `${tag}:${i}`);
  const value = (ks: string[]) => Object.fromEntries(ks.map((k) => [k, `v:${k}`]));
  await services[0].getOrLoadMany(keys.slice(0, CACHED), value, POLICY);
  const loads = new Map<string, number>();
  let calls = 0;
  const load = async (ks: string[]) => {
    calls++;
    for (const k of ks) loads.set(k, (loads.get(k) ?? 0) + 1);
    await new Promise((resolve) => setTimeout(resolve, BACKEND_MS));
    return value(ks);
  };
  const before = await redis.commandCounts();
  proxy.reset();
  const started = performance.now();
  await Promise.all(
    services.map(async (s) => {
      const one = (k: string) => s.getOrLoad(k, async () => (await load([k]))[k], POLICY);
      if (flow === 'getOrLoadMany') await s.getOrLoadMany(keys, load, POLICY);
      else if (flow === 'per-key, together') await Promise.all(keys.map(one));
      else for (const k of keys) await one(k);
    }),
  );
  const ms = performance.now() - started;
  const turns = proxy.turns;
  return {
    commands: totalCommands(commandDelta(await redis.commandCounts(), before)),
    round_trips: turns,
    loader_calls: calls,
    keys_loaded: [...loads.values()].reduce((a, b) => a + b, 0),
    max_loads_per_key: Math.max(0, ...loads.values()),
    ms,
  };
}

type Sample = Awaited<ReturnType<typeof round>>;

function batchRow(flow: (typeof FLOWS)[number], instances: number, samples: Sample[]) {
  const med = (f: (s: Sample) => number) => median(samples.map(f));
  return {
    flow,
    instances,
    /** Medians over the rounds, per 100 keys (all instances together). */
    commands: med((s) => s.commands),
    round_trips: med((s) => s.round_trips),
    loader_calls: med((s) => s.loader_calls),
    keys_loaded: med((s) => s.keys_loaded),
    /** The most loader calls, and loads of one key, in any round. */
    max_loader_calls: Math.max(...samples.map((s) => s.loader_calls)),
    max_loads_per_key: Math.max(...samples.map((s) => s.max_loads_per_key)),
    ms: med((s) => s.ms),
  };
}
export type BatchRow = ReturnType<typeof batchRow>;

export const BATCH_COLUMNS = columns<BatchRow>(
  'flow, instances, redis cmds=commands, round trips=round_trips, loader calls=loader_calls, ' +
    'keys loaded=keys_loaded, max loader calls=max_loader_calls, ' +
    'max loads/key=max_loads_per_key, ms:1',
);

export function batchLoads(ctx: ScenarioContext) {
  const rounds = Math.max(1, ctx.opts.batchRounds ?? 5);
  return runScenario(ctx, {
    privateRedis: true,
    title: () =>
      `batch: ${KEYS} keys, ${CACHED} cached, lock per key, loader ${BACKEND_MS} ms, ${rounds} rounds; per 100 keys, all instances`,
    rows: async (redis) => {
      const proxy = await RoundTripProxy.start(redis.port);
      const apps: INestApplicationContext[] = [];
      try {
        for (let i = 0; i < 2; i++) {
          const module = StampedeModule.forRoot({
            redis: proxy.url,
            keyPrefix: `${ctx.prefix}batch:`,
            operationTimeout: 5000,
            telemetry: { metrics: false, tracing: false },
          });
          apps.push(
            await NestFactory.createApplicationContext(module, { logger: ['error', 'warn'] }),
          );
        }
        const services = apps.map((app) => app.get(StampedeService));
        let n = 0;
        const runs = [1, 2].flatMap((k) => FLOWS.map((flow) => [flow, k] as const));
        return await eachOf(runs, async ([flow, k]) => {
          const tags = Array.from({ length: rounds }, () => `b${++n}`);
          const samples = await eachOf(tags, (tag) =>
            round(redis, proxy, services.slice(0, k), flow, tag),
          );
          return batchRow(flow, k, samples);
        });
      } finally {
        await Promise.all(apps.map((app) => app.close()));
        await proxy.close();
      }
    },
    columns: BATCH_COLUMNS,
    targets: batchTargets,
    targetsAt: 'table',
  });
}

/** Two instances on the same 100 keys, 50 cached: each missing key once, at most 2 loader calls. */
function batchTargets(rows: BatchRow[]): Target[] {
  const two = rows.find((r) => r.flow === 'getOrLoadMany' && r.instances === 2);
  if (!two) return [];
  return [
    {
      id: 'batch',
      text: `2 instances, ${KEYS} keys, ${CACHED} cached: each missing key loaded once, at most 2 loadMissing calls`,
      met:
        two.max_loads_per_key === 1 &&
        two.keys_loaded === KEYS - CACHED &&
        two.max_loader_calls <= 2,
      measured: `${two.keys_loaded} keys loaded (at most ${two.max_loads_per_key} per key), at most ${two.max_loader_calls} loader calls per round`,
    },
  ];
}
