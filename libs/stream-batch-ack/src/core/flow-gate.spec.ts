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

  it('is never negative, even with more acks queued than maxPending allows', () => {
    const gate = new FlowGate({ concurrency: 2, maxPending: 5 }, () => 9);
    expect(gate.room()).toBe(0);
    gate.take(2);
    expect(gate.room()).toBe(0);
  });
});

describe('FlowGate: waits', () => {
  // setImmediate stays real: isSettled() lets the promise callbacks run with it.
  beforeEach(() => jest.useFakeTimers({ doNotFake: ['setImmediate'] }));
  afterEach(() => jest.useRealTimers());

  it('a wait ends after its time when nothing happens', async () => {
    const gate = new FlowGate({ concurrency: 1, maxPending: 1 }, () => 0);
    const wait = gate.wait(100);
    jest.advanceTimersByTime(99);
    expect(await isSettled(wait)).toBe(false);
    jest.advanceTimersByTime(1);
    expect(await isSettled(wait)).toBe(true);
  });

  it('a wait for room ends early when an entry is released, and leaves no timer behind', async () => {
    const gate = new FlowGate({ concurrency: 1, maxPending: 10 }, () => 0);
    gate.take(1);
    const wait = gate.wait(10_000);
    expect(await isSettled(wait)).toBe(false);
    gate.release(1);
    expect(await isSettled(wait)).toBe(true);
    expect(gate.room()).toBe(1);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('progress() (acks sent) wakes every wait for room at once', async () => {
    const gate = new FlowGate({ concurrency: 1, maxPending: 1 }, () => 0);
    const waits = [gate.wait(10_000), gate.wait(10_000), gate.wait(10_000)];
    gate.progress();
    expect(await isSettled(Promise.all(waits))).toBe(true);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('a wait that is not for room (a backoff) ignores progress and runs its full time', async () => {
    const gate = new FlowGate({ concurrency: 1, maxPending: 1 }, () => 0);
    gate.take(1);
    const backoff = gate.wait(500, false);
    gate.release(1);
    gate.progress();
    expect(await isSettled(backoff)).toBe(false);
    jest.advanceTimersByTime(500);
    expect(await isSettled(backoff)).toBe(true);
  });

  it('a wait that ended does not end a later one', async () => {
    const gate = new FlowGate({ concurrency: 1, maxPending: 1 }, () => 0);
    const first = gate.wait(10_000);
    gate.progress();
    expect(await isSettled(first)).toBe(true);
    const second = gate.wait(10_000);
    gate.progress();
    expect(await isSettled(second)).toBe(true);
    const third = gate.wait(50);
    expect(await isSettled(third)).toBe(false);
    jest.advanceTimersByTime(50);
    expect(await isSettled(third)).toBe(true);
  });

  it('close() ends every wait, backoffs included, and later waits do not wait at all', async () => {
    const gate = new FlowGate({ concurrency: 1, maxPending: 1 }, () => 0);
    expect(gate.isClosed).toBe(false);
    const waits = [gate.wait(10_000), gate.wait(10_000, false)];
    gate.close();
    expect(gate.isClosed).toBe(true);
    expect(await isSettled(Promise.all(waits))).toBe(true);
    expect(jest.getTimerCount()).toBe(0);
    expect(await isSettled(gate.wait(10_000, false))).toBe(true);
    expect(jest.getTimerCount()).toBe(0);
  });
});
