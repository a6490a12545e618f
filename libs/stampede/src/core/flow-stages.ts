import type { Clock } from './clock';
import type { Fallback } from './fallback';
import type { HeldValues } from './held-values';
import type { KeyStates } from './key-state';
import type { LoadAndFill } from './load-and-fill';
import type { LoaderRun } from './loader-run';
import type { LockPath } from './lock-path';
import type { MetricsRegistry } from './metrics-registry';
import type { Refresher } from './refresher';
import type { StampedeStore } from './store';
import type { StoreGuard } from './store-guard';
import type { TagStamps } from './tag-stamps';
import type { TagVersions } from './tag-versions';
import type { FlowTelemetry } from './telemetry';

/**
 * The stages the get-or-load flows (get-or-load.ts, get-or-load-many.ts) are built from, made
 * once by the engine: per-key state, tag versions and stamps, store guard (timeouts, cooldown),
 * held values (L1 and last known), load and fill, fallback (the store does not answer), lock
 * path (try, wait, notify), refresher (XFetch and grace), loader run (timeouts, abort).
 */
export interface FlowStages {
  store: StampedeStore;
  keys: KeyStates;
  tags: TagVersions;
  tagStamps: TagStamps;
  guard: StoreGuard;
  held: HeldValues;
  fill: LoadAndFill;
  fallback: Fallback;
  lockPath: LockPath;
  refresher: Refresher;
  loader: LoaderRun;
  metrics: MetricsRegistry;
  telemetry: FlowTelemetry;
  clock: Clock;
}
