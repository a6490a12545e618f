import { emptyMetrics, MethodMetrics } from './metrics';
import { FlowTelemetry, MethodTelemetry, noTelemetry } from './telemetry';

/** One method's counters, with what it is exported as (see telemetry.ts). */
export interface MethodEntry {
  readonly counts: MethodMetrics;
  /** The name telemetry uses: the method or getOrLoad name (`getOrLoad` for calls without one). */
  readonly label: string;
  readonly telemetry: MethodTelemetry;
}

/** The name under which calls are counted once `maxNames` names are in use. */
export const OTHER_NAMES = '(other)';

/**
 * Counters by method name: the one record of what the flow did. `StampedeService.metrics()`
 * copies them, and the OpenTelemetry counters read them at collection (see telemetry.ts), so
 * the two cannot disagree. At most `maxNames` names: the calls of later ones are counted under
 * OTHER_NAMES (names are methods and getOrLoad names, never keys; this bounds a mistake).
 */
export class MetricsRegistry {
  private readonly byName = new Map<string, MethodEntry>();

  constructor(
    private readonly telemetry: FlowTelemetry = noTelemetry,
    /** Told once, when the first name is counted under OTHER_NAMES. */
    private readonly logger?: { warn(message: string): void },
    private readonly maxNames = 1000,
  ) {}

  for(name: string): MethodMetrics {
    return this.entry(name).counts;
  }

  /** The entry of `name`, made on first use. */
  entry(name: string): MethodEntry {
    let e = this.byName.get(name);
    if (!e) {
      if (this.byName.size >= this.maxNames && name !== OTHER_NAMES) {
        if (!this.byName.has(OTHER_NAMES)) {
          this.logger?.warn(
            `more than ${this.maxNames} metric names: "${name}" and later new names are counted under ` +
              `"${OTHER_NAMES}". Name calls by what they do (a method, a getOrLoad name), never by their key.`,
          );
        }
        return this.entry(OTHER_NAMES);
      }
      e = { counts: emptyMetrics(), label: name, telemetry: this.telemetry.method(name) };
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
