import { KeySequencer, SequencedFate } from './key-sequencer';

interface E {
  id: string;
  key?: string;
}
const e = (id: number, key?: string): E => ({ id: `${id}-0`, key });
const ids = (list: E[]) => list.map((x) => x.id);
const sequencer = (batch = false) => new KeySequencer<E>((x) => x.key, batch);
const all = (fate: SequencedFate) => (): SequencedFate => fate;

describe('KeySequencer (per-entry handlers)', () => {
  it('runs one entry per key at a time, in id order; other keys and keyless entries at once', () => {
    const s = sequencer();
    const first = s.admit([e(1, 'a'), e(2, 'a'), e(3, 'b'), e(4), e(5, 'a')]);
    expect(ids(first)).toEqual(['1-0', '3-0', '4-0']);
    expect(s.waiting).toBe(2);
    expect(ids(s.settle([e(1, 'a')], all('done')))).toEqual(['2-0']);
    expect(ids(s.settle([e(2, 'a')], all('done')))).toEqual(['5-0']);
    expect(s.settle([e(5, 'a'), e(3, 'b'), e(4)], all('done'))).toEqual([]);
    expect(s.waiting).toBe(0);
  });

  it('queues entries that arrive later behind a running one of their key', () => {
    const s = sequencer();
    s.admit([e(1, 'a')]);
    expect(s.admit([e(2, 'a'), e(3, 'b')]).map((x) => x.id)).toEqual(['3-0']);
    expect(ids(s.settle([e(1, 'a')], all('done')))).toEqual(['2-0']);
  });

  it('a failed entry holds back its key only, until its retry is done', () => {
    const s = sequencer();
    s.admit([e(1, 'a'), e(2, 'a'), e(3, 'b'), e(4, 'b')]);
    expect(s.settle([e(1, 'a')], all('retry'))).toEqual([]);
    expect(ids(s.settle([e(3, 'b')], all('done')))).toEqual(['4-0']);
    // Later entries of a arrive: still held back.
    expect(s.admit([e(5, 'a')])).toEqual([]);
    // The retry of 1 comes back: it runs first, and fails again.
    expect(ids(s.admit([e(1, 'a')]))).toEqual(['1-0']);
    expect(s.settle([e(1, 'a')], all('retry'))).toEqual([]);
    // Its next delivery is dead-lettered (done): the key goes on, in order.
    expect(ids(s.admit([e(1, 'a')]))).toEqual(['1-0']);
    expect(ids(s.settle([e(1, 'a')], all('done')))).toEqual(['2-0']);
    expect(ids(s.settle([e(2, 'a')], all('done')))).toEqual(['5-0']);
    expect(s.settle([e(5, 'a')], all('done'))).toEqual([]);
  });

  it('drop() hands back what waited and forgets every key', () => {
    const s = sequencer();
    s.admit([e(1, 'a'), e(2, 'a'), e(3, 'a')]);
    expect(ids(s.drop())).toEqual(['2-0', '3-0']);
    expect(s.waiting).toBe(0);
    // A run that ends after the drop changes nothing; the key starts afresh.
    expect(s.settle([e(1, 'a')], all('done'))).toEqual([]);
    expect(ids(s.admit([e(2, 'a')]))).toEqual(['2-0']);
  });
});

describe('KeySequencer (batch handlers)', () => {
  it('gives a batch every entry of a free key that arrived together, and holds the rest', () => {
    const s = sequencer(true);
    expect(ids(s.admit([e(1, 'a'), e(2, 'a'), e(3, 'b')]))).toEqual(['1-0', '2-0', '3-0']);
    expect(s.admit([e(4, 'a'), e(5, 'c')]).map((x) => x.id)).toEqual(['5-0']);
    expect(ids(s.settle([e(1, 'a'), e(2, 'a'), e(3, 'b')], all('done')))).toEqual(['4-0']);
  });

  it('entries after a failed one of their key come back after it, in order', () => {
    const s = sequencer(true);
    const batch = [e(1, 'a'), e(2, 'a'), e(3, 'a'), e(4, 'b')];
    s.admit(batch);
    s.admit([e(5, 'a')]);
    const fates: Record<string, SequencedFate> = {
      '1-0': 'done',
      '2-0': 'retry',
      '3-0': 'held',
      '4-0': 'done',
    };
    expect(s.settle(batch, (x) => fates[x.id])).toEqual([]);
    expect(s.waiting).toBe(2);
    expect(ids(s.admit([e(2, 'a')]))).toEqual(['2-0']);
    expect(ids(s.settle([e(2, 'a')], all('done')))).toEqual(['3-0', '5-0']);
  });
});
