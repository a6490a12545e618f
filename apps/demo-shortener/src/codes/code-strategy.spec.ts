import { isValidCode } from './base62';
import { HASH_CODE_LENGTH, hashCode, SnowflakeCodes } from './code-strategy';
import { Snowflake, SNOWFLAKE_EPOCH } from './snowflake';

describe('hash codes', () => {
  it('are 7 Base62 characters, the same for the same URL and attempt, different per attempt', () => {
    const url = 'https://example.com/a';
    expect(hashCode(url, 0)).toHaveLength(HASH_CODE_LENGTH);
    expect(isValidCode(hashCode(url, 0))).toBe(true);
    expect(hashCode(url, 0)).toBe(hashCode(url, 0));
    const attempts = new Set(Array.from({ length: 8 }, (_, i) => hashCode(url, i)));
    expect(attempts.size).toBe(8);
  });
});

describe('Snowflake', () => {
  it('packs time, worker and sequence; ids of one worker strictly grow', () => {
    let now = SNOWFLAKE_EPOCH + 1000;
    const flake = new Snowflake(5, () => now);
    const a = flake.next();
    const b = flake.next();
    expect(a >> 22n).toBe(1000n);
    expect((a >> 12n) & 0x3ffn).toBe(5n);
    expect(b).toBe(a + 1n);
    now -= 50; // the clock steps back: ids still grow
    expect(flake.next()).toBeGreaterThan(b);
  });

  it('moves to the next millisecond after 4096 ids in one', () => {
    let now = SNOWFLAKE_EPOCH + 7;
    let calls = 0;
    const flake = new Snowflake(1, () => {
      calls++;
      // the clock ticks once the generator starts waiting
      if (calls > 4100) now = SNOWFLAKE_EPOCH + 8;
      return now;
    });
    const ids = Array.from({ length: 4097 }, () => flake.next());
    expect(new Set(ids).size).toBe(4097);
    expect(ids[4096] >> 22n).toBe(8n);
  });

  it('two workers at the same instant never share an id', () => {
    const now = () => SNOWFLAKE_EPOCH + 42;
    const a = new SnowflakeCodes(1, now);
    const b = new SnowflakeCodes(2, now);
    const codes = new Set<string>();
    for (let i = 0; i < 1000; i++) codes.add(a.next()).add(b.next());
    expect(codes.size).toBe(2000);
  });

  it('refuses a worker id outside 0..1023', () => {
    expect(() => new Snowflake(1024)).toThrow(RangeError);
  });
});
