/**
 * The partitions `consumer` should own when `members` are the live consumers of the group: the
 * members sorted by name take the partitions in turn (partition i goes to member i mod M), so
 * each owns `floor(N / M)` or `ceil(N / M)`, and every member computes the same answer.
 * Empty when `consumer` is not among the members.
 */
export function assignedPartitions(
  members: readonly string[],
  consumer: string,
  partitions: number,
): number[] {
  const sorted = [...new Set(members)].sort();
  const index = sorted.indexOf(consumer);
  if (index < 0) return [];
  const out: number[] = [];
  for (let p = index; p < partitions; p += sorted.length) out.push(p);
  return out;
}
