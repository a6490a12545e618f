import { StampedeEvents } from './events';
import { DEFAULT_MAX_STALE_MS, InvalidationBusWatch } from './invalidation-bus';

describe('InvalidationBusWatch', () => {
  const watch = (maxStaleMs: number | undefined) => {
    const events = new StampedeEvents();
    const seen: string[] = [];
    events.on('stampede.bus.down', (e) => seen.push(`down:${e.store}`));
    events.on('stampede.bus.up', (e) => seen.push(`up:${e.downMs}`));
    const bus = (downAtStart?: number) =>
      new InvalidationBusWatch(
        events,
        { name: 'redis', invalidationsDownSince: () => downAtStart },
        maxStaleMs === undefined ? undefined : { maxEntries: 10, maxBytes: 1000, maxStaleMs },
      );
    return { bus, seen };
  };

  it('trusts every L1 entry while the bus is up, and for maxStaleMs after it went down', () => {
    const bus = watch(1000).bus();
    expect(bus.verifiedAfter(5000)).toBeUndefined();
    bus.changed(10_000, 10_000);
    expect(bus.verifiedAfter(10_999)).toBeUndefined(); // nothing missed for long yet
    // Then only entries verified less than maxStaleMs ago.
    expect(bus.verifiedAfter(11_000)).toBe(10_000);
    expect(bus.verifiedAfter(25_000)).toBe(24_000);
    bus.changed(undefined, 30_000);
    expect(bus.verifiedAfter(30_000)).toBeUndefined();
  });

  it('raises one event per transition, with how long the bus was down', () => {
    const { bus: make, seen } = watch(1000);
    const bus = make();
    bus.changed(undefined, 0); // already up: nothing
    bus.changed(1000, 1000);
    bus.changed(1500, 1500); // still down: nothing
    bus.changed(undefined, 4000);
    bus.changed(undefined, 5000);
    expect(seen).toEqual(['down:redis', 'up:3000']);
  });

  it('a bus down at start is not reported, nor is its first connection', () => {
    const { bus: make, seen } = watch(1000);
    const bus = make(0);
    expect(bus.verifiedAfter(2000)).toBe(1000); // but L1 is bounded meanwhile
    bus.changed(undefined, 3000);
    expect(seen).toEqual([]);
  });

  it('without L1 the default bound still applies (to the tag versions)', () => {
    const bus = watch(undefined).bus();
    bus.changed(0, 0);
    expect(bus.verifiedAfter(4_999)).toBeUndefined();
    expect(bus.verifiedAfter(1_000_000)).toBe(1_000_000 - DEFAULT_MAX_STALE_MS);
  });
});
