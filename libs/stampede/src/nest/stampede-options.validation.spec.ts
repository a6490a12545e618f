import { StampedeConfigError } from '../core/errors';
import type { StampedeModuleOptions } from './stampede.options';
import { validateStampedeOptions } from './stampede-options.validation';

describe('validateStampedeOptions', () => {
  const refused = (options: object) => {
    try {
      validateStampedeOptions(options as StampedeModuleOptions);
    } catch (err) {
      expect(err).toBeInstanceOf(StampedeConfigError);
      return (err as Error).message;
    }
    throw new Error('accepted');
  };

  it('names a misspelled option and the one it most likely means', () => {
    expect(refused({ defaultTTL: '1m' })).toBe(
      'StampedeModule option "defaultTTL": StampedeModule has no such option. Did you mean "defaultTtl"?',
    );
    expect(refused({ redis: 'redis://127.0.0.1:6379', keyprefix: 'app:' })).toContain(
      'Did you mean "keyPrefix"?',
    );
  });

  it('lists the options when nothing is near', () => {
    const message = refused({ zzzzzzzz: 1 });
    expect(message).toContain(
      'StampedeModule option "zzzzzzzz": StampedeModule has no such option.',
    );
    expect(message).toContain('redis, cacheManager, store, keyPrefix, defaultTtl');
  });

  it('accepts every documented option, and values it does not look into', () => {
    expect(() =>
      validateStampedeOptions({
        redis: { host: '127.0.0.1', port: 6379, lazyConnect: true },
        keyPrefix: 'app:',
        defaultTtl: '5m',
        operationTimeout: 500,
        cooldown: 1000,
        connectTimeout: 2000,
        l1: { maxEntries: 10, maxBytes: 1000, maxStaleMs: 100, shared: true },
        lastKnown: { maxEntries: 10 },
        serializer: { serialize: JSON.stringify, deserialize: JSON.parse },
        telemetry: { metrics: false, tracing: false },
      }),
    ).not.toThrow();
    expect(() => validateStampedeOptions({ memory: { maxEntries: 10 } })).not.toThrow();
  });

  it.each<[string, object, string]>([
    ['keyPrefix', { keyPrefix: 1 }, 'StampedeModule: keyPrefix must be a string'],
    [
      'operationTimeout',
      { operationTimeout: 0 },
      'StampedeModule: operationTimeout must be a positive number of ms, got 0',
    ],
    [
      'connectTimeout',
      { connectTimeout: NaN },
      'StampedeModule: connectTimeout must be a positive number of ms, got NaN',
    ],
    ['cooldown', { cooldown: -1 }, 'StampedeModule: cooldown must be a number of ms >= 0, got -1'],
    [
      'l1 bounds',
      { l1: { maxEntries: 1.5 } },
      'StampedeModule: l1.maxEntries must be a positive integer, got 1.5',
    ],
    [
      'l1.shared',
      { l1: { shared: 'yes' as unknown as boolean } },
      'StampedeModule: l1.shared must be a boolean, got yes',
    ],
    [
      'l1 as an array',
      { l1: [] },
      'StampedeModule: l1 must be a boolean or an object: { maxEntries?, maxBytes?, maxStaleMs?, shared? }',
    ],
    [
      'memory',
      { memory: 5 },
      'StampedeModule: memory must be an object: { maxEntries?, maxBytes? }',
    ],
    [
      'telemetry',
      { telemetry: null },
      'StampedeModule: telemetry must be an object: { metrics?, tracing?, traceL1Hits? }',
    ],
    [
      'telemetry flags',
      { telemetry: { metrics: 'yes' } },
      'StampedeModule: telemetry.metrics must be a boolean, got yes',
    ],
  ])('refuses a bad %s value, naming the option', (_name, options, message) => {
    expect(refused(options)).toBe(message);
  });

  it('takes Infinity for the timeouts and the cooldown (no limit)', () => {
    expect(() =>
      validateStampedeOptions({
        operationTimeout: Infinity,
        connectTimeout: Infinity,
        cooldown: Infinity,
      }),
    ).not.toThrow();
  });
});
