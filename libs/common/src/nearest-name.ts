/**
 * Edit distance between two strings (Levenshtein: one insertion, deletion or substitution of a
 * character costs 1).
 */
export function editDistance(a: string, b: string): number {
  if (a === b) return 0;
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++)
      current[j] = Math.min(
        previous[j] + 1,
        current[j - 1] + 1,
        previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    previous = current;
  }
  return previous[b.length];
}

/**
 * The candidate `name` most likely is a misspelling of: the nearest by edit distance, ignoring
 * case, among those within a third of the name's length (at least 1) or that begin with the name
 * (3 characters at least: `ttl` for `ttlMs`); the first of equals wins. `undefined` when none is
 * that near.
 */
export function nearestName(name: string, candidates: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  const limit = Math.max(1, Math.floor(name.length / 3));
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const other = candidate.toLowerCase();
    const distance = editDistance(lower, other);
    const near = distance <= limit || (lower.length >= 3 && other.startsWith(lower));
    if (near && distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}
