/** A cancellable sleep that never keeps the process alive. */
export function sleep(ms: number): { done: Promise<void>; cancel(): void } {
  let timer: NodeJS.Timeout | undefined;
  let resolveFn!: () => void;
  const done = new Promise<void>((resolve) => {
    resolveFn = resolve;
    timer = setTimeout(resolve, Math.max(0, ms));
    timer.unref?.();
  });
  return {
    done,
    cancel: () => {
      if (timer) clearTimeout(timer);
      resolveFn();
    },
  };
}
