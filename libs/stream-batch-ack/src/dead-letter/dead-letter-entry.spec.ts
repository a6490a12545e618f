import {
  DEAD_LETTER_FIELDS,
  isStreamId,
  missingDeadLetterFields,
  parseDeadLetter,
} from './dead-letter-entry';

const entry = (fields: Record<string, string>) => Object.entries(fields).flat();

describe('parseDeadLetter', () => {
  const written = {
    stream: 'orders',
    id: '1700000000000-0',
    group: 'workers',
    consumer: 'c1',
    deliveries: '3',
    reason: 'handler-failed',
    error: 'boom',
    errorName: 'Error',
    stack: 'Error: boom\n    at x',
    failedAt: '2024-01-01T00:00:00.000Z',
    fields: JSON.stringify({ data: '{"n":1}' }),
  };

  it('reads an entry written by the server', () => {
    expect(parseDeadLetter('1700000000001-0', entry(written), 'ignored')).toEqual({
      deadLetterId: '1700000000001-0',
      stream: 'orders',
      id: '1700000000000-0',
      group: 'workers',
      consumer: 'c1',
      deliveries: 3,
      reason: 'handler-failed',
      error: 'boom',
      errorName: 'Error',
      stack: 'Error: boom\n    at x',
      failedAt: '2024-01-01T00:00:00.000Z',
      fields: { data: '{"n":1}' },
    });
  });

  it('fills in what is missing, with the given stream; without its stream it is not replayable', () => {
    expect(parseDeadLetter('1-0', entry({ fields: '{"a":"1"}' }), 'orders')).toEqual({
      deadLetterId: '1-0',
      stream: 'orders',
      id: '',
      group: '',
      consumer: '',
      deliveries: 0,
      reason: '',
      error: '',
      errorName: '',
      stack: '',
      failedAt: '',
      fields: { a: '1' },
      problem: 'it has no "stream" field (the stream it came from)',
    });
  });

  it.each([
    ['not json', 'not valid JSON'],
    ['[1,2]', 'not a JSON object of strings'],
    ['{"n":1}', 'not a JSON object of strings'],
    ['null', 'not a JSON object of strings'],
    ['{}', 'is empty'],
  ])('an unreadable "fields" (%s) gives fields {} and a problem', (fields, problem) => {
    const d = parseDeadLetter('1-0', entry({ ...written, fields }), 'orders');
    expect(d.fields).toEqual({});
    expect(d.problem).toContain(problem);
  });

  it('a missing "fields" is a problem', () => {
    const { fields: _fields, ...rest } = written;
    expect(parseDeadLetter('1-0', entry(rest), 'orders').problem).toBe('it has no "fields" field');
    expect(parseDeadLetter('1-0', null, 'orders')).toMatchObject({ stream: 'orders', fields: {} });
  });
});

describe('isStreamId', () => {
  it.each(['0', '1-0', '1700000000000-12'])('accepts %s', (id) =>
    expect(isStreamId(id)).toBe(true),
  );
  it.each(['', '-', '+', '1-', 'abc', '1-0-0', ' 1-0', '(1-0'])('rejects "%s"', (id) =>
    expect(isStreamId(id)).toBe(false),
  );
});

describe('missingDeadLetterFields', () => {
  const all = DEAD_LETTER_FIELDS.flatMap((name) => [name, '']);
  it('an entry with every field the server writes (empty values too) misses none', () =>
    expect(missingDeadLetterFields(all)).toEqual([]));
  it('names the fields a plain message lacks', () => {
    expect(missingDeadLetterFields(['data', '{}'])).toEqual([...DEAD_LETTER_FIELDS]);
    expect(missingDeadLetterFields(all.slice(2))).toEqual(['stream']);
    expect(missingDeadLetterFields(null)).toEqual([...DEAD_LETTER_FIELDS]);
  });
  it('looks at field names only, not values', () =>
    expect(missingDeadLetterFields(['x', 'stream', 'y', 'id'])).toEqual([...DEAD_LETTER_FIELDS]));
});
