import { bySlot } from './key-slot';

describe('bySlot', () => {
  it('groups keys by slot, keeping their order', () => {
    const keys = ['{a}1', '{b}1', '{a}2', '{b}2', '{a}3'];
    const groups = bySlot(keys);
    expect(groups).toHaveLength(2);
    expect(groups).toContainEqual([0, 2, 4]);
    expect(groups).toContainEqual([1, 3]);
  });
});
