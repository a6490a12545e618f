const UNITS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;

/** `1500`, `1500ms`, `1.5s`, `10m`, `1h` -> milliseconds; undefined when `raw` is not a duration. */
export function parseDuration(raw: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h)?$/.exec(raw.trim());
  if (!m) return undefined;
  return Math.round(Number(m[1]) * UNITS[(m[2] ?? 'ms') as keyof typeof UNITS]);
}
