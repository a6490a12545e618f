import { StampedeConfigError } from './errors';
import { BatchResult, MissingBatch } from './missing-batch';

const signal = () => new AbortController().signal;

describe('MissingBatch', () => {
  it('keys asked for in one turn of the event loop share one loader call; later ones start another', async () => {
    const calls: string[][] = [];
    const batch = new MissingBatch<string>((keys) => {
      calls.push(keys);
      return Object.fromEntries(keys.map((k) => [k, `v-${k}`]));
    }, 'test');
    const first = ['a', 'b', 'c'].map((k) => batch.loaderOf(k)(signal()));
    expect(await Promise.all(first)).toEqual(['v-a', 'v-b', 'v-c']);
    expect(await batch.loaderOf('d')(signal())).toBe('v-d');
    expect(calls).toEqual([['a', 'b', 'c'], ['d']]);
  });

  it('reads a Map or a Record; a key left out is undefined', async () => {
    for (const shape of ['map', 'record'] as const) {
      const batch = new MissingBatch<number | null>((keys) => {
        const entries = keys.filter((k) => k !== 'gone').map((k) => [k, k === 'nil' ? null : 1]);
        return (
          shape === 'map' ? new Map(entries as [string, number][]) : Object.fromEntries(entries)
        ) as BatchResult<number | null>;
      }, 'test');
      const values = await Promise.all(
        ['one', 'gone', 'nil'].map((k) => batch.loaderOf(k)(signal())),
      );
      expect(values).toEqual([1, undefined, null]);
    }
  });

  it('does not read inherited properties of a Record', async () => {
    const batch = new MissingBatch<unknown>(() => ({}), 'test');
    expect(await batch.loaderOf('toString')(signal())).toBeUndefined();
  });

  it('a loader error or a result of the wrong shape rejects the keys of that call only', async () => {
    let fail = true;
    const batch = new MissingBatch<string>((keys) => {
      if (fail) throw new Error('backend down');
      return Object.fromEntries(keys.map((k) => [k, k]));
    }, 'test');
    const failed = Promise.all(['a', 'b'].map((k) => batch.loaderOf(k)(signal())));
    await expect(failed).rejects.toThrow('backend down');
    fail = false;
    await expect(batch.loaderOf('c')(signal())).resolves.toBe('c');

    const wrong = new MissingBatch<string>(() => ['x'] as never, 'Svc.find');
    await expect(wrong.loaderOf('a')(signal())).rejects.toThrow(StampedeConfigError);
    await expect(wrong.loaderOf('a')(signal())).rejects.toThrow(
      /Svc.find: loadMissing must return/,
    );
  });

  it("aborts the call's signal once every load waiting on it gave up", async () => {
    let seen: AbortSignal | undefined;
    let finish!: () => void;
    const batch = new MissingBatch<string>(async (keys, s) => {
      seen = s;
      await new Promise<void>((resolve) => (finish = resolve));
      return Object.fromEntries(keys.map((k) => [k, k]));
    }, 'test');
    const [one, two] = [new AbortController(), new AbortController()];
    const loads = [batch.loaderOf('a')(one.signal), batch.loaderOf('b')(two.signal)];
    await new Promise((resolve) => setImmediate(resolve));
    one.abort(new Error('timeout'));
    expect(seen?.aborted).toBe(false);
    two.abort(new Error('timeout'));
    expect(seen?.aborted).toBe(true);
    finish();
    await Promise.all(loads);
  });
});
