import type { Call, Loader } from '../../src/core/call';
import { ManualClock, RandomSource } from '../../src/core/clock';
import { defaultCodec } from '../../src/core/envelope';
import { StampedeEventName, StampedeEvents } from '../../src/core/events';
import { Fallback } from '../../src/core/fallback';
import { HeldValues } from '../../src/core/held-values';
import { InvalidationBusWatch } from '../../src/core/invalidation-bus';
import { KeyStates } from '../../src/core/key-state';
import type { L1Limits } from '../../src/core/l1-cache';
import { LoadAndFill } from '../../src/core/load-and-fill';
import { LoaderRun } from '../../src/core/loader-run';
import { LockPath } from '../../src/core/lock-path';
import { MetricsRegistry } from '../../src/core/metrics-registry';
import { PolicyOptions, resolvePolicy } from '../../src/core/policy';
import { Refresher } from '../../src/core/refresher';
import type { StampedeStore } from '../../src/core/store';
import { StoreGuard } from '../../src/core/store-guard';
import { TagVersions } from '../../src/core/tag-versions';
import { EarlyRecomputeSchedule } from '../../src/core/xfetch';
import { MemoryStore } from '../../src/memory/memory-store';

/** Lets pending promise callbacks (and what they start) run. */
export async function settle(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((r) => setImmediate(r));
}

/**
 * The engine's stages wired as StampedeEngine wires them, over a memory store (or `store`) on a
 * ManualClock, for the unit specs of each stage.
 */
export function stages(
  options: { store?: StampedeStore; l1?: L1Limits; random?: RandomSource } = {},
) {
  const clock = new ManualClock(1_000_000);
  const store = options.store ?? new MemoryStore({ clock });
  const random = options.random ?? (() => 0.5);
  const codec = defaultCodec;
  const events = new StampedeEvents();
  const emitted: { event: StampedeEventName; payload: unknown }[] = [];
  events.sink = (event, payload) => emitted.push({ event, payload });
  const warnings: string[] = [];
  const logger = { warn: (message: string) => warnings.push(message) };
  const tags = new TagVersions();
  const bus = new InvalidationBusWatch(events, store, options.l1, logger);
  const keys = new KeyStates();
  const guard = new StoreGuard(store.name, clock, events, logger);
  const held = new HeldValues(store, codec, clock, tags, bus, options.l1);
  const schedule = new EarlyRecomputeSchedule(random);
  const loader = new LoaderRun(clock, events);
  const fill = new LoadAndFill(store, loader, held, schedule, guard, keys, codec, clock, random);
  const fallback = new Fallback(held, guard, loader, keys, codec, clock);
  const lockPath = new LockPath(store, keys, guard, held, fill, fallback, clock, events, logger);
  const refresher = new Refresher(store, keys, fill, schedule, clock, events, logger);
  const metrics = new MetricsRegistry();
  /** One call of `key` with a policy of `policy` (TTL 1 s unless said). */
  function call<T>(key: string, load: Loader<T>, policy: PolicyOptions = {}): Call<T> {
    const e = metrics.entry('M.m');
    return {
      key,
      loader: load,
      policy: resolvePolicy({ ttl: 1000, ...policy }, 60_000, 'M.m'),
      m: e.counts,
      e,
    };
  }
  return {
    clock,
    store,
    events,
    emitted,
    warnings,
    tags,
    bus,
    keys,
    guard,
    held,
    schedule,
    loader,
    fill,
    fallback,
    lockPath,
    refresher,
    metrics,
    call,
    /** The counters of calls made with `call`. */
    counts: () => metrics.entry('M.m').counts,
    close: async () => {
      await refresher.close();
      await store.close();
    },
  };
}
