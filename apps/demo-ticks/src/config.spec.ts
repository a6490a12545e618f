import { loadTicksConfig, TicksConfigError } from './config';

describe('loadTicksConfig', () => {
  it('has the defaults of the README', () => {
    const c = loadTicksConfig({});
    expect(c.redisUrl).toBe('redis://127.0.0.1:6379');
    expect(c.http).toEqual({ host: '0.0.0.0', port: 3001 });
    expect(c.stream).toBe('ticks');
    expect(c.group).toBe('candles');
    expect(c.deadLetterStream).toBe('ticks:dlq');
    expect(c.ack).toEqual({ batchSize: 1000, intervalMs: 50, maxPending: 50_000 });
    expect(c.read).toEqual({ count: 500, blockMs: 100 });
    expect(c.idempotency).toEqual({ ttlMs: 60_000, maxSize: 100_000, lockMs: 30_000 });
    expect(c.collector.symbols * c.collector.ratePerSymbol).toBe(10_000);
    expect(c.collectorInProcess).toBe(true);
  });

  it('reads the variables', () => {
    const c = loadTicksConfig({
      TICKS_STREAM: 'md',
      ACK_BATCH_SIZE: '100',
      COLLECTOR: 'false',
      COLLECTOR_RATE: '5',
      PORT: '0',
    });
    expect(c.stream).toBe('md');
    expect(c.deadLetterStream).toBe('md:dlq');
    expect(c.ack.batchSize).toBe(100);
    expect(c.collectorInProcess).toBe(false);
    expect(c.collector.ratePerSymbol).toBe(5);
    expect(c.http.port).toBe(0);
  });

  it.each([
    [{ ACK_BATCH_SIZE: '0' }, 'ACK_BATCH_SIZE must be a whole number from 1'],
    [{ ACK_INTERVAL_MS: 'soon' }, 'ACK_INTERVAL_MS must be a whole number'],
    [{ PORT: '70000' }, 'PORT must be a whole number from 0 to 65535'],
    [{ COLLECTOR: 'maybe' }, 'COLLECTOR must be true or false'],
    [{ REDIS_URL: 'localhost:6379' }, 'REDIS_URL must start with redis://'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL must be'],
  ])('rejects %j with a message naming the variable', (env, message) => {
    expect(() => loadTicksConfig(env)).toThrow(TicksConfigError);
    expect(() => loadTicksConfig(env)).toThrow(message);
  });
});
