import { medianRows, Row } from './rows';

const row = (run: number, over: Partial<Row>) =>
  ({
    ...{ mode: 'drain', variant: 'raw', run, messages: 1000, sent: 1100, msgsPerSec: 100 },
    ...{ p50: 1, p99: 2, max: 3, xackPer1000: 2, commands: { xack: 2 }, cpuMsPer100k: 300 },
    ...{ pendingAfter: 0, missing: 0, duplicates: 0, failedOrSkipped: 0, complete: true },
    ...over,
  }) as Row;

describe('medianRows', () => {
  it('adds one row per mode and variant with several runs: medians, worst counts, all complete', () => {
    const rows = [
      row(1, { msgsPerSec: 100, commands: { xack: 2 }, ofRaw: 1 }),
      row(2, { msgsPerSec: 300, commands: { xack: 4, get: 2 }, missing: 3, complete: false }),
      row(3, { msgsPerSec: 200, commands: { xack: 6 }, ofRaw: 3 }),
      row(1, { variant: 'batch', msgsPerSec: 50 }),
    ];
    const [m, ...others] = medianRows(rows);
    expect(others).toEqual([]);
    expect(m).toMatchObject({
      mode: 'drain',
      variant: 'raw',
      run: 'median',
      msgsPerSec: 200,
      ofRaw: 2,
      commands: { xack: 4, get: 0 },
      missing: 3,
      complete: false,
      profile: undefined,
    });
    expect(m.redisCpuUsPerMsg).toBeUndefined();
  });
});
