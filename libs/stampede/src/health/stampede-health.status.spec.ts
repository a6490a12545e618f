import {
  HealthSessionLike,
  reportWarnings,
  stampedeHealthWarnings,
} from './stampede-health.status';

describe('stampedeHealthWarnings', () => {
  it('no cool-down and no fail-safe: no warning, no detail (up)', () => {
    expect(stampedeHealthWarnings({ cooldownMs: 0, failSafe: undefined, now: 1000 })).toEqual({
      details: {},
      warnings: [],
    });
  });

  it('a store in its cool-down: a warning, and how long it lasts', () => {
    expect(stampedeHealthWarnings({ cooldownMs: 800, failSafe: undefined, now: 1000 })).toEqual({
      details: { cooldownMs: 800 },
      warnings: ['the store timed out recently: calls skip it for 800 ms more (cooldown)'],
    });
  });

  it('values served stale after failed refreshes: a warning, the count, methods and for how long', () => {
    const failSafe = { keys: 3, methods: ['Rates.rate', 'Users.find'], since: 4000 };
    expect(stampedeHealthWarnings({ cooldownMs: 0, failSafe, now: 10_000 })).toEqual({
      details: { failSafe: { keys: 3, methods: ['Rates.rate', 'Users.find'], forMs: 6000 } },
      warnings: [
        '3 value(s) served stale because their refresh failed (fail-safe): Rates.rate, Users.find',
      ],
    });
  });

  it('both at once: both warnings', () => {
    const failSafe = { keys: 1, methods: ['m'], since: 0 };
    expect(stampedeHealthWarnings({ cooldownMs: 5, failSafe, now: 0 }).warnings).toHaveLength(2);
  });
});

describe('reportWarnings: degraded where terminus has it, up with a warning on terminus 11', () => {
  type Result = { status: string } & Record<string, unknown>;
  const terminus12: HealthSessionLike<Result> = {
    up: (data) => ({ ...data, status: 'up' }),
    degraded: (data) => ({ ...data, status: 'degraded' }),
  };
  const terminus11: HealthSessionLike<Result> = { up: (data) => ({ ...data, status: 'up' }) };
  const details = { store: 'redis', latencyMs: 1 };

  it('no warnings: up on both', () => {
    expect(reportWarnings(terminus12, details, [])).toEqual({ ...details, status: 'up' });
    expect(reportWarnings(terminus11, details, [])).toEqual({ ...details, status: 'up' });
  });

  it('terminus 12: degraded, the warnings in message', () => {
    expect(reportWarnings(terminus12, details, ['a', 'b'])).toEqual({
      ...details,
      status: 'degraded',
      message: 'a; b',
    });
  });

  it('terminus 11 (no degraded method): up, the warnings in warning', () => {
    expect(reportWarnings(terminus11, details, ['a'])).toEqual({
      ...details,
      status: 'up',
      warning: 'a',
    });
  });
});
