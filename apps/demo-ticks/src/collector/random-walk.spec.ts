import { RandomWalk, symbolNames } from './random-walk';

describe('RandomWalk', () => {
  it('is reproducible with a seed', () => {
    const a = new RandomWalk(3, 42);
    const b = new RandomWalk(3, 42);
    const ticks = (w: RandomWalk) => Array.from({ length: 50 }, (_, i) => w.next(i % 3, i));
    expect(ticks(a)).toEqual(ticks(b));
  });

  it('moves each price by small steps, in cents, above zero, with whole quantities 1..100', () => {
    const walk = new RandomWalk(2, 7);
    let last = walk.next(0, 0).price;
    for (let i = 1; i < 5000; i++) {
      const t = walk.next(0, i);
      expect(t.price).toBeGreaterThan(0);
      expect(Math.round(t.price * 100) / 100).toBe(t.price);
      expect(Math.abs(t.price / last - 1)).toBeLessThan(0.01);
      expect(Number.isInteger(t.qty) && t.qty >= 1 && t.qty <= 100).toBe(true);
      last = t.price;
    }
  });

  it('names symbols SYM001...', () => {
    expect(symbolNames(3)).toEqual(['SYM001', 'SYM002', 'SYM003']);
    expect(symbolNames(1000)[999]).toBe('SYM1000');
  });
});
