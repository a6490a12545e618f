import { emptyMetrics, MethodMetrics } from './metrics';
import { FlowTelemetry, MethodTelemetry, noTelemetry } from './telemetry';

/** One method's counters, with what it is exported as (see telemetry.ts). */
export interface MethodEntry {
  readonly counts: MethodMetrics;
  /** The name telemetry uses: the method name, or `getOrLoad` for calls named by their key. */
  readonly label: string;
  readonly telemetry: MethodTelemetry;
}

/**
 * Counters by method name: the one record of what the flow did. `StampedeService.metrics()`
 * copies them, and the OpenTelemetry counters read them at collection (see telemetry.ts), so
 * the two cannot disagree.
 */
export class MetricsRegistry {
  private readonly byName = new Map<string, MethodEntry>();

  constructor(private readonly telemetry: FlowTelemetry = noTelemetry) {}

  for(name: string): MethodMetrics {
    return this.entry(name).counts;
  }

  /** The entry of `name`, made on first use (`label` defaults to `name`). */
  entry(name: string, label = name): MethodEntry {
    let e = this.byName.get(name);
    if (!e) {
      e = { counts: emptyMetrics(), label, telemetry: this.telemetry.method(label) };
      this.byName.set(name, e);
    }
    return e;
  }

  entries(): IterableIterator<MethodEntry> {
    return this.byName.values();
  }

  /** A copy of every method's counters. */
  snapshot(): Record<string, MethodMetrics> {
    const out: Record<string, MethodMetrics> = {};
    for (const [name, e] of this.byName) out[name] = { ...e.counts };
    return out;
  }
}
