import { ManualClock } from '@nest-redis-resilience/common';
import { DoneIds } from './done-ids';

describe('DoneIds (fake clock)', () => {
  it('holds ids per scope until their TTL ends', () => {
    const clock = new ManualClock(1000);
    const done = new DoneIds({ clock });
    done.addMany('s1', ['1-0', '1-1'], 100);
    done.addMany('s2', ['1-0'], 50);
    expect(done.hasMany('s1', ['1-0', '1-1', '1-2'])).toEqual([true, true, false]);
    expect(done.has('s2', '1-1')).toBe(false);
    expect(done.has('s3', '1-0')).toBe(false);
    clock.advance(49);
    expect(done.has('s2', '1-0')).toBe(true);
    clock.advance(1);
    expect(done.has('s2', '1-0')).toBe(false);
    expect(done.has('s1', '1-0')).toBe(true);
    clock.advance(50);
    expect(done.hasMany('s1', ['1-0', '1-1'])).toEqual([false, false]);
  });

  it('adding an id again gives it the new expiry', () => {
    const clock = new ManualClock();
    const done = new DoneIds({ clock });
    done.addMany('s', ['1-0'], 10);
    clock.advance(5);
    done.addMany('s', ['1-0'], 10);
    clock.advance(9);
    expect(done.has('s', '1-0')).toBe(true);
    expect(done.size).toBe(2); // two batches held
  });

  it('is bounded over every scope: the oldest batches go first', () => {
    const clock = new ManualClock();
    const done = new DoneIds({ maxSize: 3, clock });
    done.addMany('a', ['1-0', '2-0'], 60_000);
    done.addMany('b', ['1-0'], 60_000);
    expect(done.has('a', '1-0')).toBe(true); // a read does not make it younger
    done.addMany('b', ['2-0'], 60_000);
    // the oldest batch goes as a whole
    expect(done.size).toBe(2);
    expect(done.hasMany('a', ['1-0', '2-0'])).toEqual([false, false]);
    expect(done.hasMany('b', ['1-0', '2-0'])).toEqual([true, true]);
  });

  it('holds 100k ids at most and stays correct while its ring is compacted', () => {
    const clock = new ManualClock();
    const done = new DoneIds({ maxSize: 100_000, clock });
    for (let i = 0; i < 150_000; i += 500)
      done.addMany(
        's',
        Array.from({ length: 500 }, (_, j) => `${i + j}-0`),
        60_000,
      );
    expect(done.size).toBe(100_000);
    expect(done.hasMany('s', ['49999-0', '50000-0', '149999-0'])).toEqual([false, true, true]);
    done.clear();
    expect(done.size).toBe(0);
    expect(done.has('s', '149999-0')).toBe(false);
  });
});

describe('DoneIds with an order of the ids', () => {
  const order = (a: string, b: string) => Number(a) - Number(b);

  it('answers "not held" above the greatest id added, and looks up the others', () => {
    const clock = new ManualClock();
    const done = new DoneIds({ maxSize: 2, clock, order });
    done.addMany('s', ['5', '3'], 1000);
    expect(done.hasMany('s', ['3', '4', '5', '6'])).toEqual([true, false, true, false]);
    done.addMany('s', ['1'], 1000); // pushes the first batch out; 5 stays the greatest id
    expect(done.hasMany('s', ['1', '3', '5'])).toEqual([true, false, false]);
    done.addMany('s', ['4'], 1000, '4');
    expect(done.hasMany('s', ['4', '6'])).toEqual([true, false]);
  });
});

describe('DoneIds: batches indexed when first asked about', () => {
  const order = (a: string, b: string) => Number(a) - Number(b);

  it('an id added again in a newer batch outlives the older batch, indexed or not', () => {
    const clock = new ManualClock();
    const done = new DoneIds({ maxSize: 3, clock, order });
    done.addMany('s', ['1', '2'], 1000);
    expect(done.has('s', '1')).toBe(true); // indexes the first batch
    done.addMany('s', ['1'], 1000);
    done.addMany('s', ['3', '4'], 1000); // pushes the first batch out
    expect(done.hasMany('s', ['1', '2', '3', '4'])).toEqual([true, false, true, true]);
    done.addMany('s', ['2'], 1000); // pushes ['1'] out
    done.addMany('s', ['5'], 1000);
    expect(done.hasMany('s', ['1', '2', '3', '5'])).toEqual([false, true, false, true]);
  });
});
