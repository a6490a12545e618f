import { Injectable } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  Cacheable,
  DistLock,
  SingleFlight,
  StampedeModule,
  StampedeService,
  XFetch,
} from '@nest-redis-resilience/stampede';
import { delay, ThrowawayRedis } from './support/redis';
import { waitFor } from '../../../test/support/wait';

const LOCK_TTL = 10_000;
const RATE_TTL = 1_000;
const PREFIX = 'slow:';

@Injectable()
class PriceService {
  loads = 0;
  rateLoads = 0;

  @Cacheable({ key: (symbol: string) => `price:${symbol}`, ttl: 60_000 })
  @SingleFlight()
  @DistLock({ ttl: LOCK_TTL, poll: 5 })
  async price(symbol: string): Promise<{ symbol: string; price: number }> {
    this.loads++;
    await delay(20);
    return { symbol, price: 100 };
  }

  @Cacheable({ key: (symbol: string) => `rate:${symbol}`, ttl: RATE_TTL })
  @SingleFlight()
  async rate(symbol: string): Promise<{ symbol: string; rate: number }> {
    this.rateLoads++;
    await delay(50);
    return { symbol, rate: 1.5 };
  }

  @Cacheable({ key: (symbol: string) => `quote:${symbol}`, ttl: 1_000 })
  @XFetch(1000) // recomputes early on nearly every call
  @DistLock({ ttl: LOCK_TTL, poll: 5 })
  async quote(symbol: string): Promise<{ symbol: string; n: number }> {
    this.loads++;
    await delay(20);
    return { symbol, n: this.loads };
  }
}

/*
 * A lock attempt that times out is not cancelled in Redis: when Redis catches up after a stall,
 * the script still runs `SET <lock> NX PX`, for a caller that has gone (it answered from its
 * loader). The store must release such a lock at once, so that the next caller does not wait for
 * a fill that never comes. `CLIENT PAUSE ... WRITE` stalls the scripts and the SETs.
 */
describe('a Redis stall: no lock is left for a caller that gave up (a redis-server of this test)', () => {
  jest.setTimeout(60_000);
  let server: ThrowawayRedis;
  let admin: Redis;
  let moduleRef: TestingModule;
  let prices: PriceService;
  let stampede: StampedeService;

  beforeAll(async () => {
    server = await ThrowawayRedis.start();
    admin = new Redis(server.url);
    moduleRef = await Test.createTestingModule({
      imports: [
        StampedeModule.forRoot({
          redis: server.url,
          keyPrefix: PREFIX,
          operationTimeout: 200,
          cooldown: 300,
        }),
      ],
      providers: [PriceService],
    }).compile();
    await moduleRef.init();
    prices = moduleRef.get(PriceService);
    stampede = moduleRef.get(StampedeService);
  });

  afterAll(async () => {
    await moduleRef?.close();
    await admin?.quit();
    await server?.destroy();
  });

  /** A refresh's lock key (a miss locks its value key: see `missLocked`). */
  const lockKey = (key: string) => `${PREFIX}{${key}}:lock`;
  /** Whether the value key of `key` holds a miss's lock mark. */
  const missLocked = async (key: string) =>
    (await admin.get(`${PREFIX}{${key}}`))?.startsWith('\u0000lock:') === true;

  it('the read-or-lock of a miss: the late lock is released and the next call loads at once', async () => {
    await admin.call('CLIENT', 'PAUSE', '1500', 'WRITE');
    const started = Date.now();
    expect(await prices.price('AAA')).toEqual({ symbol: 'AAA', price: 100 });
    expect(Date.now() - started).toBeLessThan(1400); // answered from the loader, not after the pause
    expect(stampede.metrics()['PriceService.price'].storeErrors).toBeGreaterThan(0);

    // A write of our own returns when the pause is over (after the stalled script ran and took
    // the lock); the store releases that lock.
    await admin.set(`${PREFIX}probe`, '1');
    await waitFor('the late lock is gone', async () => !(await missLocked('price:AAA')), 3000);

    await delay(350); // the store's cool-down after its timeout
    const before = { ...stampede.metrics()['PriceService.price'] };
    const again = Date.now();
    expect(await prices.price('AAA')).toEqual({ symbol: 'AAA', price: 100 });
    const after = stampede.metrics()['PriceService.price'];
    expect(after.lockWaits - before.lockWaits).toBe(0);
    expect(after.storeErrors - before.storeErrors).toBe(0);
    expect(Date.now() - again).toBeLessThan(LOCK_TTL / 2);
    expect(await admin.exists(`${PREFIX}{price:AAA}`)).toBe(1); // cached again
  });

  it('the try-lock of an early recomputation: the late lock is released too', async () => {
    expect(await prices.quote('BBB')).toMatchObject({ symbol: 'BBB' }); // cached, no stall
    await delay(550); // past half the TTL: the earliest an early recomputation starts
    const setCalls = async () =>
      Number(/cmdstat_set:calls=(\d+)/.exec(await admin.info('commandstats'))?.[1] ?? 0);
    const setsBefore = await setCalls();
    await admin.call('CLIENT', 'PAUSE', '1500', 'WRITE');
    // A hit (its GET is a read: not paused) draws an early recomputation, whose try-lock
    // (SET NX PX) stalls, times out and is abandoned; the caller has its value at once.
    const started = Date.now();
    expect(await prices.quote('BBB')).toMatchObject({ symbol: 'BBB' });
    expect(Date.now() - started).toBeLessThan(1000);
    await admin.set(`${PREFIX}probe`, '1'); // returns when the pause is over
    await waitFor(
      'the late SET NX ran, and its lock is gone',
      async () =>
        (await setCalls()) > setsBefore + 1 && (await admin.exists(lockKey('quote:BBB'))) === 0,
      3000,
    );
  });

  it('the first timeout gives up every call waiting on the stalled Redis, not each after its own timeout', async () => {
    await Promise.all(['X1', 'X2'].map((sym) => prices.rate(sym))); // warm (operationTimeout 200)
    await delay(350);
    await admin.call('CLIENT', 'PAUSE', '1500', 'ALL');
    const first = Date.now();
    const a = prices.rate('late-1').then(() => Date.now() - first);
    await delay(150);
    const second = Date.now();
    const b = prices.rate('late-2').then(() => Date.now() - second);
    // a waits out the 200 ms timeout, then loads (50 ms). b, sent 150 ms later, is given up
    // with it: about 50 + 50 ms, not its own 200 ms timeout + 50 ms.
    const [tookA, tookB] = await Promise.all([a, b]);
    expect(tookA).toBeGreaterThanOrEqual(200);
    expect(tookB).toBeLessThan(200);
    await admin.ping(); // answers when the pause is over
    await delay(350);
  });

  it('a stall does not become a backend stampede: values held here are served, and each key loads at most once per TTL', async () => {
    const symbols = Array.from({ length: 20 }, (_, i) => `S${i}`);
    await Promise.all(symbols.map((sym) => prices.rate(sym))); // warm
    await delay(350);
    const loadsBefore = prices.rateLoads;
    await admin.call('CLIENT', 'PAUSE', '2000', 'ALL');
    const started = Date.now();
    let calls = 0;
    // Rounds of calls on every key, every 50 ms, for as long as Redis is paused.
    const probe = admin.ping(); // answers when the pause is over
    let paused = true;
    void probe.then(() => (paused = false));
    while (paused) {
      const answers = await Promise.all(symbols.map((sym) => prices.rate(sym)));
      calls += answers.length;
      for (const [i, answer] of answers.entries())
        expect(answer).toEqual({ symbol: symbols[i], rate: 1.5 });
      await delay(50);
    }
    const elapsed = Date.now() - started;
    const loads = prices.rateLoads - loadsBefore;
    // Without the held values every round loads every key (calls / 20 rounds x 20 keys).
    expect(calls).toBeGreaterThan(symbols.length * 5);
    expect(loads).toBeLessThanOrEqual(symbols.length * (Math.ceil(elapsed / RATE_TTL) + 1));
  });
});
