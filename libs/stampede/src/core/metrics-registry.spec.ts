import { MetricsRegistry, OTHER_NAMES } from './metrics-registry';

describe('MetricsRegistry', () => {
  it('keeps at most maxNames names; later ones are counted under one name, reported once', () => {
    const warnings: string[] = [];
    const registry = new MetricsRegistry(undefined, { warn: (m) => warnings.push(m) }, 3);
    for (const name of ['a', 'b', 'c', 'd', 'e', 'a']) registry.for(name).calls++;
    expect(registry.snapshot()).toMatchObject({
      a: { calls: 2 },
      b: { calls: 1 },
      c: { calls: 1 },
      [OTHER_NAMES]: { calls: 2 },
    });
    expect(Object.keys(registry.snapshot())).toHaveLength(4);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('"d"');
  });
});
