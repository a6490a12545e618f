/*
 * The batch scenario of `npm run bench:stampede -- --scenario batch`: 100 keys, 50 of them
 * cached, asked for by 1 or 2 instances at once, with a lock per key; getOrLoadMany against
 * getOrLoad for each key, in a loop (one after the other) or all together (Promise.all, whose
 * commands share round trips). Per 100 keys: the Redis commands (INFO
 * commandstats of a private redis-server), the round trips (a proxy in front of it counts the
 * times a connection sends after its last reply, so pipelined commands count once), the loader
 * calls and the keys loaded. Each instance is a Nest application context in this process with
 * its own Redis connections. Medians over --batch-rounds rounds (default 5), a few seconds.
 */
import { NestFactory } from '@nestjs/core';
import type { INestApplicationContext } from '@nestjs/common';
import { StampedeModule, StampedeService } from '@nest-redis-resilience/stampede';
import { RoundTripProxy } from '../../support/round-trip-proxy';
import { Column, renderTable } from '../shared/table';
import { PrivateRedis } from '../shared/private-redis';
import { commandDelta, totalCommands } from './command-counts';
import { logTargets, ScenarioContext } from './context';
import type { Target } from '../shared/targets';

const KEYS = 100;
const CACHED = 50;
const POLICY = { ttl: 600_000, lock: { ttl: 5000 } };

export type BatchFlow = 'getOrLoadMany' | 'per-key, together' | 'per-key loop';

export interface BatchRow {
  flow: BatchFlow;
  instances: number;
  /** Medians over the rounds, per 100 keys (all instances together). */
  commands: number;
  round_trips: number;
  loader_calls: number;
  keys_loaded: number;
  /** The most loader calls, and loads of one key, in any round. */
  max_loader_calls: number;
  max_loads_per_key: number;
  ms: number;
}

export const BATCH_COLUMNS: Column<BatchRow>[] = [
  { header: 'flow', value: (r) => r.flow },
  { header: 'instances', value: (r) => r.instances },
  { header: 'redis cmds', value: (r) => r.commands },
  { header: 'round trips', value: (r) => r.round_trips },
  { header: 'loader calls', value: (r) => r.loader_calls },
  { header: 'keys loaded', value: (r) => r.keys_loaded },
  { header: 'max loader calls', value: (r) => r.max_loader_calls },
  { header: 'max loads/key', value: (r) => r.max_loads_per_key },
  { header: 'ms', value: (r) => r.ms, digits: 1 },
];

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export async function batchLoads(ctx: ScenarioContext): Promise<BatchRow[]> {
  const rounds = Math.max(1, ctx.opts.batchRounds ?? 5);
  const backendMs = 20;
  ctx.log(
    `\n## batch: ${KEYS} keys, ${CACHED} cached, lock per key, loader ${backendMs} ms, ${rounds} rounds; per 100 keys, all instances`,
  );
  const redis = await PrivateRedis.start();
  const proxy = await RoundTripProxy.start(redis.port);
  const apps: INestApplicationContext[] = [];
  const rows: BatchRow[] = [];
  try {
    for (let i = 0; i < 2; i++) {
      const module = StampedeModule.forRoot({
        redis: proxy.url,
        keyPrefix: `${ctx.prefix}batch:`,
        operationTimeout: 5000,
        telemetry: { metrics: false, tracing: false },
      });
      apps.push(await NestFactory.createApplicationContext(module, { logger: ['error', 'warn'] }));
    }
    const services = apps.map((app) => app.get(StampedeService));
    let n = 0;
    for (const instances of [1, 2]) {
      for (const flow of ['per-key loop', 'per-key, together', 'getOrLoadMany'] as BatchFlow[]) {
        const samples: Omit<BatchRow, 'flow' | 'instances'>[] = [];
        for (let round = 0; round < rounds; round++) {
          const keys = Array.from({ length: KEYS }, (_, i) => `b${++n}:${i}`);
          await services[0].getOrLoadMany(
            keys.slice(0, CACHED),
            (ks) => Object.fromEntries(ks.map((k) => [k, `v:${k}`])),
            POLICY,
          );
          const loads = new Map<string, number>();
          let calls = 0;
          const load = async (ks: string[]) => {
            calls++;
            for (const k of ks) loads.set(k, (loads.get(k) ?? 0) + 1);
            await new Promise((resolve) => setTimeout(resolve, backendMs));
            return Object.fromEntries(ks.map((k) => [k, `v:${k}`]));
          };
          const before = await redis.commandCounts();
          proxy.reset();
          const started = performance.now();
          await Promise.all(
            services.slice(0, instances).map(async (s) => {
              const one = (k: string) => s.getOrLoad(k, async () => (await load([k]))[k], POLICY);
              if (flow === 'getOrLoadMany') await s.getOrLoadMany(keys, load, POLICY);
              else if (flow === 'per-key, together') await Promise.all(keys.map(one));
              else for (const k of keys) await one(k);
            }),
          );
          const ms = performance.now() - started;
          const turns = proxy.turns;
          const commands = totalCommands(commandDelta(await redis.commandCounts(), before));
          samples.push({
            commands,
            round_trips: turns,
            loader_calls: calls,
            keys_loaded: [...loads.values()].reduce((a, b) => a + b, 0),
            max_loader_calls: calls,
            max_loads_per_key: Math.max(0, ...loads.values()),
            ms,
          });
        }
        rows.push({
          flow,
          instances,
          commands: median(samples.map((s) => s.commands)),
          round_trips: median(samples.map((s) => s.round_trips)),
          loader_calls: median(samples.map((s) => s.loader_calls)),
          keys_loaded: median(samples.map((s) => s.keys_loaded)),
          max_loader_calls: Math.max(...samples.map((s) => s.max_loader_calls)),
          max_loads_per_key: Math.max(...samples.map((s) => s.max_loads_per_key)),
          ms: median(samples.map((s) => s.ms)),
        });
      }
    }
  } finally {
    await Promise.all(apps.map((app) => app.close()));
    await proxy.close();
    await redis.stop();
  }
  ctx.log(renderTable(BATCH_COLUMNS, rows));
  logTargets(ctx, batchTargets(rows));
  return rows;
}

/** Two instances on the same 100 keys, 50 cached: each missing key once, at most 2 loader calls. */
export function batchTargets(rows: BatchRow[]): Target[] {
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
