import { ManualClock } from './clock';
import { StampedeEvents } from './events';
import { emptyMetrics } from './metrics';
import { StoreGuard } from './store-guard';

describe('StoreGuard: the store as the flow sees it', () => {
  function guard() {
    const clock = new ManualClock(1000);
    const events = new StampedeEvents();
    const emitted: [string, unknown][] = [];
    events.sink = (event, payload) => emitted.push([event, payload]);
    const warnings: string[] = [];
    const g = new StoreGuard('redis', clock, events, { warn: (m) => warnings.push(m) });
    return { clock, g, emitted, warnings, m: emptyMetrics() };
  }

  it('one unavailable event per outage however many calls fail, and one recovered event', () => {
    const { clock, g, emitted, m } = guard();
    expect(g.down).toBe(false);
    g.answered(); // up already: nothing
    g.failed(new Error('ECONNREFUSED'), m, 'loaded');
    g.failed(new Error('ECONNREFUSED'), m, 'loaded');
    expect(g.down).toBe(true);
    expect(m.storeErrors).toBe(2);
    clock.advance(1500);
    g.answered();
    g.answered();
    expect(g.down).toBe(false);
    expect(emitted).toEqual([
      ['stampede.store.unavailable', { store: 'redis', error: 'ECONNREFUSED' }],
      ['stampede.store.recovered', { store: 'redis', downMs: 1500 }],
    ]);
  });

  it('warns at most once per 10 s, saying what the call did instead', () => {
    const { clock, g, warnings, m } = guard();
    clock.advance(10_000);
    g.failed(new Error('timeout'), m, 'answered by its loader');
    clock.advance(9_999);
    g.failed(new Error('timeout'), m, 'answered by its loader');
    expect(warnings).toEqual(['redis store unavailable (timeout); answered by its loader']);
    clock.advance(1);
    g.failed('plain', m, 'served a held value');
    expect(warnings[1]).toBe('redis store unavailable (plain); served a held value');
  });
});
