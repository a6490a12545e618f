import { backoffDelay } from './backoff';
import {
  compareStreamIds,
  decodeEntry,
  DEFAULT_REPLY_PREFIX,
  encodePayload,
  mergeMetadata,
  replyStreamName,
  replyToRefusal,
} from './entry-codec';

describe('entry codec', () => {
  it('decodes the client format (a single JSON "data" field)', () => {
    expect(decodeEntry(encodePayload({ symbol: 'BTC', price: 1 }))).toEqual({
      ok: true,
      payload: { symbol: 'BTC', price: 1 },
      fields: { data: '{"symbol":"BTC","price":1}' },
      headers: {},
    });
    expect(decodeEntry(encodePayload(undefined))).toMatchObject({ ok: true, payload: null });
  });

  it('reports malformed JSON instead of throwing', () => {
    const decoded = decodeEntry(['data', '{bad']);
    expect(decoded.ok).toBe(false);
    expect(decoded.fields).toEqual({ data: '{bad' });
  });

  it('delivers entries of other producers as a plain object of their fields', () => {
    expect(decodeEntry(['symbol', 'BTC', 'price', '1'])).toEqual({
      ok: true,
      payload: { symbol: 'BTC', price: '1' },
      fields: { symbol: 'BTC', price: '1' },
      headers: {},
    });
    expect(decodeEntry(['data', 'not json', 'other', 'x'])).toMatchObject({
      ok: true,
      payload: { data: 'not json', other: 'x' },
    });
  });

  it('carries headers and the request fields of send()', () => {
    const flat = encodePayload(
      { a: 1 },
      { traceparent: '00-abc-def-01' },
      { id: 'c1', replyTo: 'r' },
    );
    expect(decodeEntry(flat)).toMatchObject({
      ok: true,
      payload: { a: 1 },
      headers: { traceparent: '00-abc-def-01' },
      request: { id: 'c1', replyTo: 'r' },
    });
    expect(encodePayload(1, {})).toEqual(['data', '1']);
  });

  it('reports malformed headers and half a request', () => {
    expect(decodeEntry(['data', '1', 'headers', '[1]'])).toMatchObject({
      ok: false,
      error: '"headers" must be a JSON object',
    });
    expect(decodeEntry(['data', '1', 'headers', '{"n":1}'])).toMatchObject({
      ok: false,
      error: '"headers" values must be strings',
    });
    expect(decodeEntry(['data', '1', 'id', 'c1'])).toMatchObject({ ok: false });
  });

  it('compares stream ids numerically', () => {
    expect(compareStreamIds('9-0', '10-0')).toBe(-1);
    expect(compareStreamIds('10-2', '10-10')).toBe(-1);
    expect(compareStreamIds('10-2', '10-2')).toBe(0);
    expect(compareStreamIds('11-0', '10-99')).toBe(1);
  });
});

describe('reply stream names', () => {
  const uuid = '1b671a64-40d5-491e-99b0-da01ff1f3341';

  it('accepts exactly <prefix>{<uuid v4>}', () => {
    expect(replyStreamName(DEFAULT_REPLY_PREFIX, uuid)).toBe(`sba:reply:{${uuid}}`);
    expect(replyToRefusal(`sba:reply:{${uuid}}`, DEFAULT_REPLY_PREFIX)).toBeUndefined();
    expect(replyToRefusal(`app:r:{${uuid}}`, 'app:r:')).toBeUndefined();
  });

  it.each([
    ['another key', 'orders'],
    ['the prefix alone', 'sba:reply:'],
    ['no hash tag', `sba:reply:${uuid}`],
    ['something after the tag', `sba:reply:{${uuid}}:x`],
    ['not a uuid', 'sba:reply:{orders}'],
    ['an upper-case uuid', `sba:reply:{${uuid.toUpperCase()}}`],
    ['a uuid of another version', 'sba:reply:{1b671a64-40d5-191e-99b0-da01ff1f3341}'],
    ['another prefix', `other:reply:{${uuid}}`],
  ])('refuses %s, naming the namespace', (_what, replyTo) => {
    const reason = replyToRefusal(replyTo, DEFAULT_REPLY_PREFIX);
    expect(reason).toContain(`"replyTo" (${JSON.stringify(replyTo)}) is not a reply stream`);
    expect(reason).toContain('"sba:reply:{<uuid v4>}"');
    expect(reason).toContain('replyPrefix');
  });

  it('decodeEntry with a replyPrefix: a request replying elsewhere is malformed', () => {
    const request = (replyTo: string) => encodePayload({ a: 1 }, undefined, { id: 'c1', replyTo });
    expect(decodeEntry(request('orders'), { replyPrefix: 'sba:reply:' })).toMatchObject({
      ok: false,
      error: expect.stringContaining('"replyTo" ("orders") is not a reply stream'),
    });
    expect(
      decodeEntry(request(`sba:reply:{${uuid}}`), { replyPrefix: 'sba:reply:' }),
    ).toMatchObject({ ok: true, request: { id: 'c1', replyTo: `sba:reply:{${uuid}}` } });
    // without the option (events, which are not answered): decoded as before
    expect(decodeEntry(request('orders'))).toMatchObject({ ok: true });
  });
});

describe('backoffDelay', () => {
  it('grows exponentially, is capped and jittered within bounds', () => {
    const mid = () => 0.5;
    expect(
      [1, 2, 3, 4, 10].map((a) => backoffDelay(a, { initialMs: 50, maxMs: 1000 }, mid)),
    ).toEqual([50, 100, 200, 400, 1000]);
    expect(backoffDelay(1, { initialMs: 100, jitter: 0.2 }, () => 0)).toBe(80);
    expect(backoffDelay(1, { initialMs: 100, jitter: 0.2 }, () => 1)).toBe(120);
  });
});

describe('mergeMetadata (packet metadata into headers)', () => {
  it('writes the metadata as headers; the record headers win over metadata of the same name', () => {
    expect(mergeMetadata({ requestId: 'r1' })).toEqual({ requestId: 'r1' });
    expect(mergeMetadata({ requestId: 'r1', tenant: 't' }, { requestId: 'mine' })).toEqual({
      requestId: 'mine',
      tenant: 't',
    });
  });

  it('no metadata (NestJS 11, no dispatch hook, or an empty map): the headers as they are', () => {
    const headers = { traceparent: 'x' };
    expect(mergeMetadata(undefined, headers)).toBe(headers);
    expect(mergeMetadata(null, headers)).toBe(headers);
    expect(mergeMetadata({}, headers)).toBe(headers);
    expect(mergeMetadata({ gone: undefined })).toBeUndefined();
  });

  it('refuses values that are not strings (the consumer would refuse the headers)', () => {
    expect(() => mergeMetadata({ attempt: 2 })).toThrow(
      'Packet metadata "attempt" must be a string, got number',
    );
    expect(() => mergeMetadata({ a: null })).toThrow('got null');
    expect(() => mergeMetadata('x')).toThrow('must be an object of strings');
    expect(() => mergeMetadata(['x'])).toThrow('must be an object of strings');
  });

  it('the merged headers decode as the headers of the entry', () => {
    const headers = mergeMetadata({ requestId: 'r1' }, { locale: 'fr' });
    expect(decodeEntry(encodePayload({ n: 1 }, headers))).toMatchObject({
      ok: true,
      headers: { requestId: 'r1', locale: 'fr' },
    });
  });
});
