import { backgroundClock, ManualClock, systemClock } from './clock';

describe('ManualClock', () => {
  it('fires the timers that fall due, in time order, at their own time', () => {
    const clock = new ManualClock(100);
    const fired: [string, number][] = [];
    clock.setTimer(() => fired.push(['b', clock.now()]), 20);
    clock.setTimer(() => fired.push(['a', clock.now()]), 10);
    const dropped = clock.setTimer(() => fired.push(['x', clock.now()]), 15);
    clock.clearTimer(dropped);
    clock.advance(15);
    expect(fired).toEqual([['a', 110]]);
    clock.advance(100);
    expect(fired).toEqual([
      ['a', 110],
      ['b', 120],
    ]);
    expect(clock.now()).toBe(215);
    expect(clock.pendingTimers).toBe(0);
  });
});

describe('the system clocks', () => {
  it('backgroundClock timers do not hold the process; systemClock timers do', () => {
    const background = backgroundClock.setTimer(() => undefined, 60_000) as NodeJS.Timeout;
    const held = systemClock.setTimer(() => undefined, 60_000) as NodeJS.Timeout;
    expect(background.hasRef()).toBe(false);
    expect(held.hasRef()).toBe(true);
    backgroundClock.clearTimer(background);
    systemClock.clearTimer(held);
  });
});
