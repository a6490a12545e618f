import { ManualClock } from '@nest-redis-resilience/common';
import { FlowGate } from './flow-gate';

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Resolves to whether `promise` settled by the time the queued callbacks ran. */
async function isSettled(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  void promise.then(() => (settled = true));
  await settle();
  return settled;
}

describe('FlowGate: room', () => {
  it('is bounded by concurrency: entries taken count until released', () => {
    const gate = new FlowGate({ concurrency: 4, maxPending: 100 }, () => 0);
    expect(gate.room()).toBe(4);
    gate.take(3);
    expect(gate.inFlight).toBe(3);
    expect(gate.room()).toBe(1);
    gate.take(1);
    expect(gate.room()).toBe(0);
    gate.release(2);
    expect(gate.inFlight).toBe(2);
    expect(gate.room()).toBe(2);
  });

  it('is bounded by maxPending: running entries plus the acks still queued', () => {
    let queued = 3;
    const gate = new FlowGate({ concurrency: 10, maxPending: 5 }, () => queued);
    expect(gate.room()).toBe(2);
    gate.take(2);
    expect(gate.room()).toBe(0);
    // Both finished: no longer running, but their acks wait in the batcher.
    gate.release(2);
    queued += 2;
    expect(gate.room()).toBe(0);
    // The batched XACK went out.
    queued = 0;
    expect(gate.room()).toBe(5);
  });

  it('taking only what room() gives keeps running <= concurrency and unacked <= maxPending', () => {
    // A deterministic walk: handlers start, finish (their acks queue), and batched XACKs go out.
    let seed = 42;
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    let queued = 0;
    const limits = { concurrency: 7, maxPending: 12 };
    const gate = new FlowGate(limits, () => queued);
    for (let step = 0; step < 5000; step++) {
      const action = next(3);
      if (action === 0) gate.take(next(gate.room() + 1));
      else if (action === 1 && gate.inFlight > 0) {
        const done = 1 + next(gate.inFlight);
        gate.release(done);
        queued += done;
      } else if (action === 2) queued -= next(queued + 1);
      expect(gate.inFlight).toBeLessThanOrEqual(limits.concurrency);
      expect(gate.inFlight + queued).toBeLessThanOrEqual(limits.maxPending);
      expect(gate.room()).toBeGreaterThanOrEqual(0);
    }
  });

  it('is never negative, even with more acks queued than maxPending allows', () => {
    const gate = new FlowGate({ concurrency: 2, maxPending: 5 }, () => 9);
    expect(gate.room()).toBe(0);
    gate.take(2);
    expect(gate.room()).toBe(0);
  });
});

describe('FlowGate: waits', () => {
  let clock: ManualClock;
  beforeEach(() => (clock = new ManualClock()));

  it('a wait ends after its time when nothing happens', async () => {
    const gate = new FlowGate({ concurrency: 1, maxPending: 1 }, () => 0, clock);
    const wait = gate.wait(100);
    clock.advance(99);
    expect(await isSettled(wait)).toBe(false);
    clock.advance(1);
    expect(await isSettled(wait)).toBe(true);
  });

  it('a wait for room ends early when an entry is released, and leaves no timer behind', async () => {
    const gate = new FlowGate({ concurrency: 1, maxPending: 10 }, () => 0, clock);
    gate.take(1);
    const wait = gate.wait(10_000);
    expect(await isSettled(wait)).toBe(false);
    gate.release(1);
    expect(await isSettled(wait)).toBe(true);
    expect(gate.room()).toBe(1);
    expect(clock.pendingTimers).toBe(0);
  });

  it('progress() (acks sent) wakes every wait for room at once', async () => {
    const gate = new FlowGate({ concurrency: 1, maxPending: 1 }, () => 0, clock);
    const waits = [gate.wait(10_000), gate.wait(10_000), gate.wait(10_000)];
    gate.progress();
    expect(await isSettled(Promise.all(waits))).toBe(true);
    expect(clock.pendingTimers).toBe(0);
  });

  it('a wait that is not for room (a backoff) ignores progress and runs its full time', async () => {
    const gate = new FlowGate({ concurrency: 1, maxPending: 1 }, () => 0, clock);
    gate.take(1);
    const backoff = gate.wait(500, false);
    gate.release(1);
    gate.progress();
    expect(await isSettled(backoff)).toBe(false);
    clock.advance(500);
    expect(await isSettled(backoff)).toBe(true);
  });

  it('a wait that ended does not end a later one', async () => {
    const gate = new FlowGate({ concurrency: 1, maxPending: 1 }, () => 0, clock);
    const first = gate.wait(10_000);
    gate.progress();
    expect(await isSettled(first)).toBe(true);
    const second = gate.wait(10_000);
    gate.progress();
    expect(await isSettled(second)).toBe(true);
    const third = gate.wait(50);
    expect(await isSettled(third)).toBe(false);
    clock.advance(50);
    expect(await isSettled(third)).toBe(true);
  });

  it('close() ends every wait, backoffs included, and later waits do not wait at all', async () => {
    const gate = new FlowGate({ concurrency: 1, maxPending: 1 }, () => 0, clock);
    expect(gate.isClosed).toBe(false);
    const waits = [gate.wait(10_000), gate.wait(10_000, false)];
    gate.close();
    expect(gate.isClosed).toBe(true);
    expect(await isSettled(Promise.all(waits))).toBe(true);
    expect(clock.pendingTimers).toBe(0);
    expect(await isSettled(gate.wait(10_000, false))).toBe(true);
    expect(clock.pendingTimers).toBe(0);
  });
});
