import { parseTicksEnv, TicksConfigError } from './ticks-env.schema';

describe('parseTicksEnv', () => {
  it('has the defaults of the README', () => {
    const c = parseTicksEnv({});
    expect(c.redis.url).toBe('redis://127.0.0.1:6379');
    expect(c.http).toEqual({
      host: '0.0.0.0',
      port: 3001,
      health: { maxLag: 10_000, maxPending: 50_000, timeoutMs: 1000 },
    });
    expect(c.consumer).toMatchObject({
      stream: 'ticks',
      group: 'candles',
      deadLetterStream: 'ticks:dlq',
      read: { count: 500, blockMs: 100 },
      ack: { batchSize: 1000, intervalMs: 50, maxPending: 50_000 },
      claim: { minIdleMs: 30_000, intervalMs: 100, count: 1000 },
      maxDeliveries: 5,
      concurrency: 2000,
      idempotency: { ttlMs: 60_000, maxSize: 100_000, lockMs: 30_000 },
    });
    expect(c.consumer.consumer).toBe(`${require('node:os').hostname()}-${process.pid}`);
    expect(c.candles).toEqual({ keyPrefix: 'ticks:', keep: 1440, applyBatchMax: 256 });
    expect(c.limits).toEqual({
      maxPrice: 1e12,
      maxQty: 1e12,
      maxAgeMs: 86_400_000,
      maxFutureMs: 60_000,
    });
    expect(c.collector).toMatchObject({ inProcess: true, stream: 'ticks', maxLen: 100_000 });
    expect(c.collector.symbols * c.collector.ratePerSymbol).toBe(10_000);
    expect(c.collector.replayFile).toBeUndefined();
    expect(c.logging.level).toBe('log');
  });

  it('reads the variables; blank ones take their default', () => {
    const c = parseTicksEnv({
      TICKS_STREAM: 'md',
      ACK_BATCH_SIZE: '100',
      COLLECTOR: 'false',
      COLLECTOR_RATE: ' 5 ',
      PORT: '0',
      CLAIM_COUNT: '5000',
      TICK_MAX_QTY: '1.7976931348623157e308',
      TICK_MAX_AGE_MS: '',
      LOG_LEVEL: 'silent',
    });
    expect(c.consumer.stream).toBe('md');
    expect(c.consumer.deadLetterStream).toBe('md:dlq');
    expect(c.collector.stream).toBe('md');
    expect(c.consumer.ack.batchSize).toBe(100);
    expect(c.consumer.claim.count).toBe(5000);
    expect(c.collector.inProcess).toBe(false);
    expect(c.collector.ratePerSymbol).toBe(5);
    expect(c.http.port).toBe(0);
    expect(c.limits.maxQty).toBe(Number.MAX_VALUE);
    expect(c.limits.maxAgeMs).toBe(86_400_000);
    expect(c.logging.level).toBe('silent');
  });

  it.each([
    [{ ACK_BATCH_SIZE: '0' }, 'ACK_BATCH_SIZE must be a whole number >= 1 (got "0")'],
    [{ ACK_INTERVAL_MS: 'soon' }, 'ACK_INTERVAL_MS must be a whole number >= 1 (got "soon")'],
    [{ CLAIM_COUNT: '1.5' }, 'CLAIM_COUNT must be a whole number >= 1 (got "1.5")'],
    [{ PORT: '70000' }, 'PORT must be a whole number from 0 to 65535 (got "70000")'],
    [
      { COLLECTOR: 'maybe' },
      'COLLECTOR must be true or false (also 1/0, yes/no, on/off) (got "maybe")',
    ],
    [
      { REDIS_URL: 'localhost:6379' },
      'REDIS_URL must be a redis:// or rediss:// URL (got "localhost:6379")',
    ],
    [
      { LOG_LEVEL: 'loud' },
      'LOG_LEVEL must be one of debug, log, warn, error, silent (got "loud")',
    ],
    [
      { TICK_MAX_QTY: '1e309' },
      'TICK_MAX_QTY must be a positive number (at most 1.7976931348623157e308) (got "1e309")',
    ],
    [{ TICK_MAX_PRICE: '-1' }, 'TICK_MAX_PRICE must be a positive number'],
    [{ TICK_MAX_FUTURE_MS: '-1' }, 'TICK_MAX_FUTURE_MS must be a whole number >= 0 (got "-1")'],
  ])(
    'rejects %j with a message naming the variable, the value and what is allowed',
    (env, message) => {
      expect(() => parseTicksEnv(env)).toThrow(TicksConfigError);
      expect(() => parseTicksEnv(env)).toThrow(message);
    },
  );

  it('names every bad variable at once', () => {
    try {
      parseTicksEnv({ PORT: 'x', READ_COUNT: '0', TICKS_STREAM: 'ok' });
      throw new Error('no error');
    } catch (err) {
      expect(err).toBeInstanceOf(TicksConfigError);
      expect((err as TicksConfigError).variables).toEqual(['PORT', 'READ_COUNT']);
      expect((err as TicksConfigError).message).toBe(
        'PORT must be a whole number from 0 to 65535 (got "x"); READ_COUNT must be a whole number >= 1 (got "0")',
      );
    }
  });
});
