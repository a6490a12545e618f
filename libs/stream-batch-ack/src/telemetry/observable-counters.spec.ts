import type { Attributes, BatchObservableResult, Meter, Observable } from '@opentelemetry/api';
import { ObservableServerCounters } from './observable-counters';
import { ServerCounters } from './server-metrics';
import * as N from './telemetry.names';

/** A meter that keeps the batch callback, so that a test can collect when it wants. */
function fakeMeter() {
  let callback: ((result: BatchObservableResult) => void) | undefined;
  const meter = {
    createObservableCounter: (name: string) => ({ name }),
    addBatchObservableCallback: (cb: (result: BatchObservableResult) => void) => (callback = cb),
  } as unknown as Meter;
  /** One collection: value by instrument name and stream. */
  const collect = () => {
    const points = new Map<string, number>();
    const result = {
      observe: (instrument: Observable, value: number, attrs: Attributes = {}) => {
        const key = `${(instrument as unknown as { name: string }).name} ${String(attrs[N.ATTR_DESTINATION])}`;
        // Observations of one attribute set: the last one wins, as in the SDK.
        points.set(key, value);
      },
    } as unknown as BatchObservableResult;
    callback!(result);
    return points;
  };
  return { meter, collect };
}

describe('ObservableServerCounters', () => {
  it('reports what the server counted, read at collection; never a point for nothing', () => {
    const { meter, collect } = fakeMeter();
    const exported = new ObservableServerCounters(meter);
    const counts = new ServerCounters();
    exported.add('g', counts);
    counts.of('s').delivered += 3;
    expect(collect().get(`${N.METRIC.consumed} s`)).toBe(3);
    counts.of('s').delivered += 2;
    counts.of('s').failed += 1;
    const points = collect();
    expect(points.get(`${N.METRIC.consumed} s`)).toBe(5);
    expect(points.get(`${N.METRIC.failed} s`)).toBe(1);
    expect(points.has(`${N.METRIC.retried} s`)).toBe(false);
    expect(counts.totals()).toMatchObject({ delivered: 5, failed: 1, retried: 0 });
  });

  it('sums the servers of one stream and group, and keeps the counts of a stopped one', () => {
    const { meter, collect } = fakeMeter();
    const exported = new ObservableServerCounters(meter);
    const a = new ServerCounters();
    const b = new ServerCounters();
    const stopA = exported.add('g', a);
    exported.add('g', b);
    a.of('s').delivered += 4;
    b.of('s').delivered += 6;
    expect(collect().get(`${N.METRIC.consumed} s`)).toBe(10);
    stopA();
    stopA();
    b.of('s').delivered += 1;
    expect(collect().get(`${N.METRIC.consumed} s`)).toBe(11);
  });

  it('a server started again is not counted twice', () => {
    const { meter, collect } = fakeMeter();
    const exported = new ObservableServerCounters(meter);
    const counts = new ServerCounters();
    const stop = exported.add('g', counts);
    counts.of('s').xackCalls += 2;
    stop();
    exported.add('g', counts);
    expect(collect().get(`${N.METRIC.xackCalls} s`)).toBe(2);
    counts.of('s').xackCalls += 1;
    expect(collect().get(`${N.METRIC.xackCalls} s`)).toBe(3);
  });
});

describe('ServerCounters', () => {
  it('totals sum every stream, dead letters over their reasons', () => {
    const counts = new ServerCounters();
    counts.of('a').deadLettered.set('malformed', 2);
    counts.of('b').deadLettered.set('max-deliveries', 1);
    counts.of('a').xackIds += 10;
    counts.of('b').xackIds += 5;
    counts.succeeded = 7;
    expect(counts.totals()).toMatchObject({ deadLettered: 3, xackIds: 15, succeeded: 7 });
  });
});
