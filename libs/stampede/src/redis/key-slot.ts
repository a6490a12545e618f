import { keySlot } from '@nest-redis-resilience/common';

/** The indexes of `keys` grouped by slot, in order within each group. */
export function bySlot(keys: string[]): number[][] {
  const groups = new Map<number, number[]>();
  keys.forEach((key, i) => {
    const slot = keySlot(key);
    const group = groups.get(slot);
    if (group) group.push(i);
    else groups.set(slot, [i]);
  });
  return [...groups.values()];
}
