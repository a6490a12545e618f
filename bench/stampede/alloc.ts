/**
 * Heap bytes allocated and CPU time per call of the library's flow, by kind of call: an L1 hit (a
 * decoded copy, and with `l1.shared` the one shared copy), a Redis hit and a load (a miss that
 * takes the lock, loads and fills). Each kind runs `--calls` sequential calls between two forced
 * GCs with a young generation large enough that no GC runs in between (checked: a run with a GC
 * is reported as such), so the growth of the heap is what the calls allocated (the objects they
 * keep, such as the values in L1 and Redis' reply buffers, included). CPU time is the median of
 * the rounds, the loop's own `await` included.
 *
 *   node --expose-gc --max-semi-space-size=256 -r ./scripts/register-ts.js bench/stampede/alloc.ts \
 *     [--calls 20000] [--rounds 5] [--items 0] [--lib <dir of a libs/stampede/src>]
 *
 * `--lib` measures another checkout of the library (for before/after) with the same script.
 */
import { PerformanceObserver } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import * as path from 'node:path';
import { Redis } from 'ioredis';
import { quantile, renderTable } from '../shared/table';
import { columns } from '../shared/columns';
import { deleteKeys } from '../shared/redis-stats';

const { values } = parseArgs({
  options: {
    calls: { type: 'string', default: '20000' },
    rounds: { type: 'string', default: '5' },
    items: { type: 'string', default: '0' },
    lib: { type: 'string', default: path.join(__dirname, '../../libs/stampede/src') },
  },
});
const CALLS = Number(values.calls);
const ROUNDS = Number(values.rounds);
const ITEMS = Number(values.items);
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

const lib = values.lib!;
const { StampedeEngine } = require(path.join(lib, 'core/stampede-engine'));
const { RedisStore } = require(path.join(lib, 'redis/redis-store'));
const { resolvePolicy } = require(path.join(lib, 'core/policy'));

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

let gcs = 0;
new PerformanceObserver((list) => (gcs += list.getEntries().length)).observe({
  entryTypes: ['gc'],
});

/** kept_per_call: heap still held after the rounds and a forced GC (a leak would show here). */
async function measure(kind: string, run: (round: number) => Promise<void>) {
  const perCall: number[] = [];
  const cpuPerCall: number[] = [];
  let withGc = 0;
  await run(-1); // warm-up: code paths compiled, pools filled
  gc!();
  gc!();
  const start = process.memoryUsage().heapUsed;
  for (let round = 0; round < ROUNDS; round++) {
    gc!();
    gc!();
    // The observer hears of those GCs a moment later: only then is the count of the run's own.
    for (let i = 0; i < 3; i++) await new Promise((r) => setTimeout(r, 5));
    const gcsBefore = gcs;
    const before = process.memoryUsage().heapUsed;
    const cpu = process.cpuUsage();
    await run(round);
    const { user, system } = process.cpuUsage(cpu);
    const after = process.memoryUsage().heapUsed;
    cpuPerCall.push((user + system) / CALLS);
    for (let i = 0; i < 3; i++) await new Promise((r) => setTimeout(r, 5)); // GCs of the run
    if (gcs !== gcsBefore) withGc++;
    else perCall.push((after - before) / CALLS);
  }
  perCall.sort((a, b) => a - b);
  gc!();
  gc!();
  return {
    kept_per_call: (process.memoryUsage().heapUsed - start) / (CALLS * ROUNDS),
    kind,
    bytes_per_call: perCall.length ? quantile(perCall, 0.5) : NaN,
    us_per_call: quantile(
      cpuPerCall.sort((a, b) => a - b),
      0.5,
    ),
    min: perCall[0] ?? NaN,
    max: perCall[perCall.length - 1] ?? NaN,
    runs_with_gc: withGc,
  };
}

async function main(): Promise<void> {
  const prefix = `bench:alloc:${randomBytes(4).toString('hex')}:`;
  const admin = new Redis(REDIS_URL);
  const rows: Awaited<ReturnType<typeof measure>>[] = [];
  // With --items N, a list of N such records besides (about 70 bytes of JSON each).
  const record = (id: number) => ({ id, name: 'a value of about a hundred bytes', ok: true });
  const value = {
    ...record(42),
    ...(ITEMS > 0 && { items: Array.from({ length: ITEMS }, (_, i) => record(i)) }),
  };
  const loader = async () => value;
  for (const l1 of [false, true, 'shared'] as const) {
    const store = new RedisStore(REDIS_URL, { keyPrefix: `${prefix}${l1 ? 'l1' : 'r'}:` });
    await store.waitUntilReady(5000);
    const engine = new StampedeEngine({
      store,
      l1: l1 ? { maxEntries: 1_000_000, maxBytes: 1e9, shared: l1 === 'shared' } : undefined,
      lastKnown: { maxEntries: 1_000_000, maxBytes: 1e9 },
    });
    // The README's full setup (two-tier-xfetch), with a TTL no run reaches.
    const policy = resolvePolicy(
      { ttl: 600_000, lock: true, xfetch: { beta: 1 } },
      600_000,
      'alloc',
    );
    const name = 'Bench.item';
    await engine.getOrLoad('hot', loader, policy, name);
    rows.push(
      await measure(
        l1 ? `L1 hit${l1 === 'shared' ? ' (l1.shared)' : ''}` : 'Redis hit',
        async () => {
          for (let i = 0; i < CALLS; i++) await engine.getOrLoad('hot', loader, policy, name);
        },
      ),
    );
    if (!l1) {
      rows.push(
        await measure('load (miss, lock, fill)', async (round) => {
          for (let i = 0; i < CALLS; i++)
            await engine.getOrLoad(`miss:${round}:${i}`, loader, policy, name);
        }),
      );
    }
    await engine.close();
    await store.close();
  }
  await deleteKeys(admin, prefix);
  admin.disconnect();
  console.log(
    `library: ${path.relative(process.cwd(), lib) || lib}; value ${JSON.stringify(value).length} bytes of JSON; ` +
      `${CALLS} calls x ${ROUNDS} rounds per kind, median of rounds without a GC`,
  );
  const spec =
    'kind, CPU µs/call=us_per_call:2, bytes/call=bytes_per_call:0, min:0, max:0, ' +
    'rounds with a GC (not counted)=runs_with_gc, ' +
    'kept/call after GC=kept_per_call:1';
  console.log(renderTable(columns(spec), rows));
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
