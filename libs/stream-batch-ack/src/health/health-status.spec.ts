import { HealthSessionLike, reportWarnings, streamHealthVerdict } from './health-status';

describe('streamHealthVerdict', () => {
  const thresholds = { maxPending: 100, warnPending: 10, maxLag: 1000, warnLag: 50 };

  it('up at or below every threshold, and without thresholds', () => {
    expect(streamHealthVerdict({ pending: 10, lag: 50 }, thresholds)).toEqual({
      status: 'up',
      problems: [],
      warnings: [],
    });
    expect(streamHealthVerdict({ pending: 1e9, lag: 1e9 }, {}).status).toBe('up');
  });

  it('degraded above a warning threshold only', () => {
    expect(streamHealthVerdict({ pending: 11, lag: 0 }, thresholds)).toEqual({
      status: 'degraded',
      problems: [],
      warnings: ['pending 11 > 10 (warnPending)'],
    });
    expect(streamHealthVerdict({ pending: 0, lag: 51 }, thresholds)).toEqual({
      status: 'degraded',
      problems: [],
      warnings: ['lag 51 > 50 (warnLag)'],
    });
  });

  it('down above a hard threshold, whatever the warnings; a value above both counts once, as a problem', () => {
    expect(streamHealthVerdict({ pending: 101, lag: 51 }, thresholds)).toEqual({
      status: 'down',
      problems: ['pending 101 > 100'],
      warnings: ['lag 51 > 50 (warnLag)'],
    });
    expect(streamHealthVerdict({ pending: 0, lag: 1001 }, thresholds)).toEqual({
      status: 'down',
      problems: ['lag 1001 > 1000'],
      warnings: [],
    });
  });

  it('a warning threshold above the hard one never degrades: the hard one decides', () => {
    const odd = { maxLag: 10, warnLag: 100 };
    expect(streamHealthVerdict({ pending: 0, lag: 50 }, odd).status).toBe('down');
    expect(streamHealthVerdict({ pending: 0, lag: 5 }, odd).status).toBe('up');
  });

  it('an unknown lag (Redis before 7) crosses nothing', () => {
    expect(streamHealthVerdict({ pending: 0, lag: null }, { maxLag: 0, warnLag: 0 }).status).toBe(
      'up',
    );
  });
});

describe('reportWarnings: degraded where terminus has it, up with a warning on terminus 11', () => {
  type Result = { status: string } & Record<string, unknown>;
  const terminus12: HealthSessionLike<Result> = {
    up: (data) => ({ ...data, status: 'up' }),
    degraded: (data) => ({ ...data, status: 'degraded' }),
  };
  const terminus11: HealthSessionLike<Result> = { up: (data) => ({ ...data, status: 'up' }) };
  const details = { stream: 's', pending: 11 };

  it('no warnings: up, with the details as they are, on both', () => {
    expect(reportWarnings(terminus12, details, [])).toEqual({ ...details, status: 'up' });
    expect(reportWarnings(terminus11, details, [])).toEqual({ ...details, status: 'up' });
  });

  it('terminus 12: degraded, the warnings in message', () => {
    expect(reportWarnings(terminus12, details, ['a', 'b'])).toEqual({
      ...details,
      status: 'degraded',
      message: 'a, b',
    });
  });

  it('terminus 11 (no degraded method): up, the warnings in warning', () => {
    expect(reportWarnings(terminus11, details, ['a'])).toEqual({
      ...details,
      status: 'up',
      warning: 'a',
    });
  });

  it('calls degraded on the session (terminus methods use this)', () => {
    const session = {
      key: 'k',
      up(data: Record<string, unknown>) {
        return { [this.key]: { ...data, status: 'up' } };
      },
      degraded(data: Record<string, unknown>) {
        return { [this.key]: { ...data, status: 'degraded' } };
      },
    };
    expect(reportWarnings(session, {}, ['w'])).toEqual({
      k: { status: 'degraded', message: 'w' },
    });
  });
});
