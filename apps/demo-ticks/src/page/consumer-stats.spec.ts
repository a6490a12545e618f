import { consumerRates } from './consumer-stats';

describe('consumerRates', () => {
  const at = 1_700_000_000_000;

  it('gives no rates without an earlier sample, or after a long gap', () => {
    const current = { at, handled: 10, xacks: 1, ackedIds: 10 };
    expect(consumerRates(undefined, current)).toEqual({
      ticksPerSec: null,
      xacksPerSec: null,
      idsPerXack: null,
    });
    expect(consumerRates({ ...current, at: at - 60_000 }, current)).toEqual({
      ticksPerSec: null,
      xacksPerSec: null,
      idsPerXack: null,
    });
  });

  it('divides the differences by the time between the samples', () => {
    const previous = { at, handled: 1000, xacks: 10, ackedIds: 1000 };
    const current = { at: at + 2000, handled: 21_000, xacks: 50, ackedIds: 21_000 };
    expect(consumerRates(previous, current)).toEqual({
      ticksPerSec: 10_000,
      xacksPerSec: 20,
      idsPerXack: 500,
    });
  });

  it('has no ids per XACK when no XACK was sent', () => {
    const previous = { at, handled: 5, xacks: 3, ackedIds: 5 };
    expect(consumerRates(previous, { ...previous, at: at + 1000 }).idsPerXack).toBeNull();
  });
});
