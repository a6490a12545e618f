export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Polls `check` until it returns true, or fails with `what` after `timeoutMs` (a function is
 * called then: it can say the state that was reached).
 */
export async function waitFor(
  what: string | (() => string),
  check: () => boolean | Promise<boolean>,
  timeoutMs = 15_000,
  everyMs = 20,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline)
      throw new Error(
        `Timed out after ${timeoutMs} ms waiting for: ${typeof what === 'string' ? what : what()}`,
      );
    await sleep(everyMs);
  }
}
