import { settle, stages } from '../../test/support/stages';
import { StampedeTimeoutError } from './errors';
import { currentLoadSignal } from './loader-run';

describe('LoaderRun: counted, timed, bounded by the hard timeout', () => {
  it('counts loads and errors', async () => {
    const s = stages();
    const c = s.call('k', async () => 'v');
    expect(await s.loader.run(c.loader, c.e, new AbortController(), c.policy)).toBe('v');
    await expect(
      s.loader.run(
        async () => Promise.reject(new Error('db')),
        c.e,
        new AbortController(),
        c.policy,
      ),
    ).rejects.toThrow('db');
    expect(s.counts()).toMatchObject({ loads: 2, errors: 1 });
    await s.close();
  });

  it('past the hard timeout: StampedeTimeoutError, the signal aborts, an event; the load goes on', async () => {
    const s = stages();
    let signal: AbortSignal | undefined;
    let inside: AbortSignal | undefined;
    let finish!: (v: string) => void;
    const c = s.call(
      'k',
      (sig) => {
        signal = sig;
        inside = currentLoadSignal();
        return new Promise<string>((r) => (finish = r));
      },
      { timeout: 200 },
    );
    const controller = new AbortController();
    const running = s.loader.run(c.loader, c.e, controller, c.policy);
    const bounded = s.loader.bounded(running, c, controller);
    await settle();
    expect(inside).toBe(signal); // currentLoadSignal() inside a loader with a hard timeout
    s.clock.advance(199);
    await settle();
    expect(signal!.aborted).toBe(false);
    s.clock.advance(1);
    await expect(bounded).rejects.toBeInstanceOf(StampedeTimeoutError);
    expect(signal!.aborted).toBe(true);
    expect(s.counts().timeouts).toBe(1);
    expect(s.emitted).toEqual([
      {
        event: 'stampede.load.timeout',
        payload: expect.objectContaining({ method: 'M.m', timeoutMs: 200 }),
      },
    ]);
    finish('late');
    expect(await running).toBe('late');
    await s.close();
  });

  it('without a hard timeout: no timer, and no load signal in the async context', async () => {
    const s = stages();
    let inside: AbortSignal | undefined = new AbortController().signal;
    const c = s.call('k', async () => {
      inside = currentLoadSignal();
      return 1;
    });
    const timers = s.clock.pendingTimers; // the memory store's sweeper
    const controller = new AbortController();
    const running = s.loader.run(c.loader, c.e, controller, c.policy);
    expect(s.loader.bounded(running, c, controller)).toBe(running);
    await running;
    expect(inside).toBeUndefined();
    expect(s.clock.pendingTimers).toBe(timers);
    await s.close();
  });
});
