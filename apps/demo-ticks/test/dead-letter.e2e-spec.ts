import { Redis } from 'ioredis';
import { missingDeadLetterFields, parseDeadLetter } from '@nest-redis-resilience/stream-batch-ack';
import { startTicksApp, TicksApp } from '../src/ticks-app.factory';
import {
  deleteKeys,
  expectedCandles,
  fetchCandles,
  pendingCount,
  publish,
  randomPrefix,
  readDeadLetters,
  readFixture,
  REDIS_URL,
  testConfig,
  waitFor,
} from './support/helpers';

const prefix = randomPrefix('dlq');
const valid = readFixture().slice(0, 300);

jest.setTimeout(30_000);

describe('malformed ticks go to the dead-letter stream; the rest is processed exactly', () => {
  let redis: Redis;
  let ticks: TicksApp;
  let stream: string;
  let dlq: string;
  const badIds = new Map<string, string>();

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    ticks = await startTicksApp(testConfig(prefix));
    stream = ticks.config.consumer.stream;
    dlq = ticks.config.consumer.deadLetterStream;
    const ts = valid[10].ts;
    const bad: [string, string[]][] = [
      ['not JSON', ['data', '{"symbol":"AAA","price":']],
      ['missing qty', ['data', JSON.stringify({ symbol: 'AAA', price: 1, ts })]],
      ['non-numeric price', ['data', JSON.stringify({ symbol: 'AAA', price: 'abc', qty: 1, ts })]],
      ['negative qty', ['data', JSON.stringify({ symbol: 'BBB', price: 5, qty: -3, ts })]],
      [
        'fractional ts',
        ['data', JSON.stringify({ symbol: 'CCC', price: 5, qty: 3, ts: ts + 0.5 })],
      ],
      ['not an object', ['data', '[1,2,3]']],
      [
        'foreign entry, non-numeric',
        ['symbol', 'AAA', 'price', 'x1', 'qty', '1', 'ts', String(ts)],
      ],
    ];
    // Bad entries between good ones: a third of the good ticks, the bad ones, then the rest.
    await publish(redis, stream, valid.slice(0, 100));
    for (const [what, fields] of bad)
      badIds.set((await redis.xadd(stream, '*', ...fields)) as string, what);
    // A foreign entry with valid numeric strings is a tick like any other.
    await redis.xadd(
      stream,
      '*',
      'symbol',
      'AAA',
      'price',
      String(valid[5].price),
      'qty',
      '2',
      'ts',
      String(ts),
    );
    await publish(redis, stream, valid.slice(100));
    await waitFor(
      'the good ticks handled and the bad ones dead-lettered',
      async () =>
        (await ticks.metrics.value('ticks_handled_total')) === valid.length + 1 &&
        Number(await redis.xlen(dlq)) === bad.length,
    );
    await waitFor(
      'no entry pending',
      async () => (await pendingCount(redis, stream, 'candles')) === 0,
    );
  });

  afterAll(async () => {
    await ticks?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('each bad entry is in the dead-letter stream once, with its reason and original fields', async () => {
    const entries = await readDeadLetters(redis, ticks.config);
    expect(entries.map((e) => e.id).sort()).toEqual([...badIds.keys()].sort());
    for (const e of entries) {
      expect(e.stream).toBe(stream);
      expect(e.problem).toBeUndefined(); // its original fields can be replayed
      if (badIds.get(e.id) === 'not JSON') expect(e.reason).toBe('malformed');
      else expect(e.reason).toBe('invalid-tick');
    }
    const byWhat = new Map(entries.map((e) => [badIds.get(e.id), e.error]));
    expect(byWhat.get('missing qty')).toContain('qty is missing');
    expect(byWhat.get('non-numeric price')).toContain(
      'price must be a positive number (got "abc")',
    );
    expect(byWhat.get('negative qty')).toContain('qty must be a positive number (got -3)');
    expect(byWhat.get('fractional ts')).toContain('ts must be a whole number');
    expect(byWhat.get('not an object')).toContain('a tick must be an object');
    expect(byWhat.get('foreign entry, non-numeric')).toContain(
      'price must be a positive number (got "x1")',
    );
    expect(await ticks.metrics.value('ticks_dead_lettered_total', { reason: 'invalid-tick' })).toBe(
      badIds.size - 1,
    ); // 'not JSON' is the library's
  });

  it("the consumer's own dead letters are in the library's format (DeadLetters and sba-dlq read them)", async () => {
    for (const [deadLetterId, flat] of await redis.xrange(dlq, '-', '+')) {
      expect(missingDeadLetterFields(flat)).toEqual([]);
      const parsed = parseDeadLetter(deadLetterId, flat, dlq);
      expect(parsed.problem).toBeUndefined();
      expect(parsed.stream).toBe(stream);
      expect(parsed.group).toBe('candles');
    }
  });

  it('the candles are exactly those of the good ticks (the foreign one included); no bad value reached them', async () => {
    const good = [
      ...valid.slice(0, 100),
      { symbol: 'AAA', price: valid[5].price, qty: 2, ts: valid[10].ts },
      ...valid.slice(100),
    ];
    for (const symbol of ['AAA', 'BBB', 'CCC'])
      for (const interval of ['1m', '5m', '30m'])
        expect(await fetchCandles(ticks.url, symbol, interval)).toEqual(
          expectedCandles(good, symbol, interval),
        );
  });

  it('the consumer is still up', async () => {
    const res = await fetch(`${ticks.url}/health`);
    expect(res.status).toBe(200);
  });
});
