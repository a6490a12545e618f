import type { Clock } from './clock';

/** A cancellable sleep on `clock`; cancelling resolves it at once. */
export function sleep(clock: Clock, ms: number): { done: Promise<void>; cancel(): void } {
  let resolveFn!: () => void;
  const done = new Promise<void>((resolve) => (resolveFn = resolve));
  const timer = clock.setTimer(resolveFn, Math.max(0, ms));
  return {
    done,
    cancel: () => {
      clock.clearTimer(timer);
      resolveFn();
    },
  };
}

/** Calls `fn` every `ms` on `clock` until the returned function is called. */
export function every(clock: Clock, ms: number, fn: () => void): () => void {
  let timer: unknown;
  let stopped = false;
  const tick = () => {
    if (stopped) return;
    fn();
    if (!stopped) timer = clock.setTimer(tick, ms);
  };
  timer = clock.setTimer(tick, ms);
  return () => {
    stopped = true;
    clock.clearTimer(timer);
  };
}
