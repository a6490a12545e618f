import { ManualClock } from './clock';
import { every, sleep } from './timers';

describe('timers on an injected clock', () => {
  it('sleep resolves when the clock reaches it, or at once when cancelled', async () => {
    const clock = new ManualClock();
    let woke = false;
    void sleep(clock, 100).done.then(() => (woke = true));
    clock.advance(99);
    await Promise.resolve();
    expect(woke).toBe(false);
    clock.advance(1);
    await Promise.resolve();
    expect(woke).toBe(true);
    const nap = sleep(clock, 1e9);
    nap.cancel();
    await nap.done;
    expect(clock.pendingTimers).toBe(0);
  });

  it('every repeats until stopped, and leaves no timer behind', () => {
    const clock = new ManualClock();
    let ticks = 0;
    const stop = every(clock, 10, () => ticks++);
    clock.advance(35);
    expect(ticks).toBe(3);
    stop();
    clock.advance(100);
    expect(ticks).toBe(3);
    expect(clock.pendingTimers).toBe(0);
  });
});
