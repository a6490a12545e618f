import { AsyncLocalStorage } from 'node:async_hooks';
import type { Call, Loader } from './call';
import type { Clock } from './clock';
import { StampedeTimeoutError } from './errors';
import { keyPattern, StampedeEvents } from './events';
import { LoadContext } from './load-context';
import type { MethodEntry } from './metrics-registry';
import type { StampedePolicy } from './policy';

const loadSignals = new AsyncLocalStorage<AbortSignal>();

/**
 * The AbortSignal of the load that runs the calling code (for example a decorated method's
 * body, which has no signal parameter), for methods with a hard timeout (the only thing that
 * aborts it); undefined otherwise.
 */
export function currentLoadSignal(): AbortSignal | undefined {
  return loadSignals.getStore();
}

/** Runs loaders: counted, timed, and bounded by the policy's hard timeout, which aborts them. */
export class LoaderRun {
  constructor(
    private readonly clock: Clock,
    private readonly events: StampedeEvents,
  ) {}

  /**
   * Runs a loader with its AbortSignal (also reachable through currentLoadSignal()) and the
   * context where it may set the TTL, grace and tags of its value.
   */
  async run<T>(
    loader: Loader<T>,
    e: MethodEntry,
    controller: AbortController,
    policy: StampedePolicy,
    context = new LoadContext('', controller.signal),
  ): Promise<T> {
    e.counts.loads++;
    const started = this.clock.now();
    try {
      // Only a hard timeout aborts the signal. Without one, the loader runs outside the
      // AsyncLocalStorage: on Node 20 its first use turns on promise hooks for the whole process.
      const value = await (policy.timeout?.hard
        ? loadSignals.run(controller.signal, () => loader(controller.signal, context))
        : loader(controller.signal, context));
      e.telemetry.loaded(this.clock.now() - started);
      return value;
    } catch (err) {
      e.counts.errors++;
      e.telemetry.loaded(this.clock.now() - started);
      throw err;
    }
  }

  /** The load of a call that is not cached (`cache: false`): its own context, bounded. */
  uncached<T>(call: Call<T>): Promise<T> {
    const controller = new AbortController();
    const context = new LoadContext(call.key, controller.signal);
    return this.bounded(
      this.run(call.loader, call.e, controller, call.policy, context),
      call,
      controller,
    );
  }

  /**
   * `running` as the caller sees it: past the hard timeout, a StampedeTimeoutError (and the
   * load's signal aborts), while the load itself may still finish.
   */
  bounded<T>(
    running: Promise<T>,
    call: Pick<Call<T>, 'key' | 'policy' | 'm' | 'e'>,
    controller: AbortController,
  ): Promise<T> {
    const hard = call.policy.timeout?.hard;
    if (!hard) return running;
    running.catch(() => undefined); // settles after the callers gave up: not unhandled
    return new Promise<T>((resolve, reject) => {
      const timer = this.clock.setTimer(() => {
        call.m.timeouts++;
        this.events.emit('stampede.load.timeout', {
          method: call.e.label,
          keyPattern: keyPattern(call.key),
          timeoutMs: hard,
        });
        const error = new StampedeTimeoutError(
          `loading "${call.key}" took longer than ${hard} ms (timeout.hard); it may still finish and fill the cache`,
        );
        controller.abort(error);
        reject(error);
      }, hard);
      running.then(
        (value) => {
          this.clock.clearTimer(timer);
          resolve(value);
        },
        (err: unknown) => {
          this.clock.clearTimer(timer);
          reject(err);
        },
      );
    });
  }
}
