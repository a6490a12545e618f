import { lockToken } from './lock-token';

describe('lockToken', () => {
  it('never repeats, and never looks like a waiter or filled mark', () => {
    const tokens = Array.from({ length: 10_000 }, () => lockToken());
    expect(new Set(tokens).size).toBe(tokens.length);
    for (const token of tokens) expect(token).not.toMatch(/\|(w|filled)$/);
  });
});
