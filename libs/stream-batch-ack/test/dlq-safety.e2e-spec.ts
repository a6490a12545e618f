import { Redis } from 'ioredis';
import { main } from '../src/dead-letter/dlq-cli';
import { addDeadLetter, addDeadLetters, dlq, dlqMain, spawnDlq } from './support/dead-letters';
import { deleteKeys, randomPrefix, readAll, REDIS_URL, waitFor } from './support/helpers';
import { DedicatedRedis, startRedisServer } from './support/redis-server';

/*
 * sba-dlq must not delete or rewrite streams that are not its dead-letter streams, must write
 * replayed dead letters only into a stream they came from, must say what it had done when it
 * stops half-way, and must not let stored values drive the operator's terminal.
 */
const prefix = randomPrefix('dlq-safety');
jest.setTimeout(60_000);

let keys = 0;
const newKey = (name = 's') => `${prefix}${name}${++keys}`;

/** A stream in use: a group, 3 entries delivered to a consumer and not acknowledged. */
async function liveStream(redis: Redis): Promise<string> {
  const stream = newKey('live');
  await redis.xgroup('CREATE', stream, 'workers', '$', 'MKSTREAM');
  for (let i = 0; i < 3; i++) await redis.xadd(stream, '*', 'data', `{"n":${i}}`);
  await redis.xreadgroup('GROUP', 'workers', 'c1', 'COUNT', 10, 'STREAMS', stream, '>');
  return stream;
}

/** A stream a group consumes, ready to receive replayed entries. */
async function sourceStream(redis: Redis, name = 'src'): Promise<string> {
  const stream = newKey(name);
  await redis.xgroup('CREATE', stream, 'workers', '$', 'MKSTREAM');
  return stream;
}

const replayedIds = (stdout: string) =>
  [...stdout.matchAll(/^replayed (\S+) -> /gm)].map((m) => m[1]);

describe('sba-dlq refuses streams that are not dead-letter streams', () => {
  let redis: Redis;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('drop --dlq <live stream> --all refuses and leaves every entry; --force drops them', async () => {
    const live = await liveStream(redis);
    const before = await readAll(redis, live);

    const refused = await dlq(['drop', 'orders', '--dlq', live, '--all']);
    expect(refused.code).toBe(2);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toContain(
      `refusing to drop the entries of "${live}": it does not look like a dead-letter stream`,
    );
    expect(refused.stderr).toContain('consumer group "workers" has 3 pending entries');
    expect(refused.stderr).toContain('lacks the dead-letter fields');
    expect(refused.stderr).toContain('--force');
    expect(await readAll(redis, live)).toEqual(before);

    const replay = await dlq(['replay', 'orders', '--dlq', live, '--all']);
    expect(replay.code).toBe(2);
    expect(replay.stderr).toContain('does not look like a dead-letter stream');
    expect(await readAll(redis, live)).toEqual(before);

    const forced = await dlq(['drop', 'orders', '--dlq', live, '--all', '--force']);
    expect(forced.code).toBe(0);
    expect(forced.stderr).toContain('--force');
    expect(forced.stdout).toContain(`Dropped 3 dead letter(s) from "${live}"`);
    expect(await redis.xlen(live)).toBe(0);
  });

  it('drop by id of a live stream refuses too', async () => {
    const live = await liveStream(redis);
    const [first] = await readAll(redis, live);
    const refused = await dlqMain(['drop', 'orders', '--dlq', live, first.id]);
    expect(refused.code).toBe(2);
    expect(await redis.xlen(live)).toBe(3);
  });

  it('a real dead-letter stream (default name) is dropped without --force', async () => {
    const stream = newKey();
    await addDeadLetters(redis, stream, 3);
    // A group on the dead-letter stream with nothing pending does not make it live.
    await redis.xgroup('CREATE', `${stream}:dlq`, 'alerts', '$');
    const dropped = await dlq(['drop', stream, '--all']);
    expect(dropped).toMatchObject({ code: 0, stderr: '' });
    expect(dropped.stdout).toContain(`Dropped 3 dead letter(s) from "${stream}:dlq"`);
  });

  it('a missing or empty dead-letter stream: nothing to do, and no key is created', async () => {
    const stream = newKey();
    for (const command of ['drop', 'replay']) {
      const run = await dlqMain([command, stream, '--all']);
      expect(run).toMatchObject({ code: 0, stderr: '' });
      expect(run.stdout).toContain(`"${stream}:dlq" does not exist: nothing to do`);
    }
    expect(await redis.exists(`${stream}:dlq`, stream)).toBe(0);

    const empty = newKey();
    const id = (await redis.xadd(`${empty}:dlq`, '*', 'a', '1')) as string;
    await redis.xdel(`${empty}:dlq`, id);
    const run = await dlqMain(['replay', empty, '--all']);
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout).toContain(`"${empty}:dlq" is empty: nothing to do`);
    expect(await redis.exists(empty)).toBe(0);
  });

  it('a key that is not a stream is refused', async () => {
    const key = newKey('str');
    await redis.set(key, 'precious');
    const run = await dlqMain(['drop', 'orders', '--dlq', key, '--all', '--force']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`"${key}" is a string, not a stream`);
    expect(await redis.get(key)).toBe('precious');
  });
});

describe('sba-dlq replay writes only into the stream a dead letter came from', () => {
  let redis: Redis;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('a source that is a string, a missing key or a dead-letter stream is refused for that entry; nothing is written there', async () => {
    const dead = newKey('dead');
    const stringKey = newKey('str');
    await redis.set(stringKey, 'precious');
    const missingKey = newKey('missing');
    const otherDlq = newKey('other');
    await addDeadLetter(redis, newKey(), { data: '{}' }, {}, otherDlq);
    const good = await sourceStream(redis);

    const toString = await addDeadLetter(redis, stringKey, { data: '1' }, {}, dead);
    const toMissing = await addDeadLetter(redis, missingKey, { data: '2' }, {}, dead);
    const toDlq = await addDeadLetter(redis, otherDlq, { data: '3' }, {}, dead);
    const toGood = await addDeadLetter(redis, good, { data: '4' }, {}, dead);

    const run = await dlq(['replay', 'orders', '--dlq', dead, '--all']);
    expect(run.code).toBe(1);
    expect(replayedIds(run.stdout)).toEqual([toGood]);
    expect(run.stdout).toMatch(
      new RegExp(`refused +${toString}: .*"${stringKey}" is a string, not a stream`),
    );
    expect(run.stdout).toMatch(
      new RegExp(`refused +${toMissing}: .*"${missingKey}" does not exist`),
    );
    expect(run.stdout).toMatch(new RegExp(`refused +${toDlq}: .*"${otherDlq}" holds dead letters`));

    expect(await redis.get(stringKey)).toBe('precious');
    expect(await redis.exists(missingKey)).toBe(0);
    expect(await redis.xlen(otherDlq)).toBe(1);
    expect((await readAll(redis, good)).map((e) => e.fields)).toEqual([{ data: '4' }]);
    expect((await readAll(redis, dead)).map((e) => e.id)).toEqual([toString, toMissing, toDlq]);
  });

  it('a dead letter naming another stream than the one whose dead letters these are is refused', async () => {
    const stream = await sourceStream(redis);
    const elsewhere = await sourceStream(redis, 'elsewhere');
    const stray = await addDeadLetter(redis, elsewhere, { data: '1' }, {}, `${stream}:dlq`);
    const run = await dlq(['replay', stream, stray]);
    expect(run.code).toBe(1);
    expect(run.stdout).toContain(`whose dead letters go to "${elsewhere}:dlq"`);
    expect(await redis.xlen(elsewhere)).toBe(0);
    expect(await redis.xlen(`${stream}:dlq`)).toBe(1);
  });
});

describe('sba-dlq replay stopped half-way says what it replayed', () => {
  let redis: Redis;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('an abort (as on Ctrl-C) after the first page: the printed ids are exactly those replayed', async () => {
    const stream = await sourceStream(redis);
    const ids = await addDeadLetters(redis, stream, 250);
    const controller = new AbortController();
    let stdout = '';
    let stderr = '';
    const code = await main(['replay', stream, '--all'], {
      out: (text) => {
        stdout += text;
        if (text.startsWith('replayed ')) controller.abort(new Error('test abort'));
      },
      err: (text) => (stderr += text),
      env: { REDIS_URL },
      signal: controller.signal,
    });

    expect(code).not.toBe(0);
    const printed = replayedIds(stdout);
    expect(printed.length).toBeGreaterThan(0);
    expect(printed.length).toBeLessThan(ids.length);
    const left = (await readAll(redis, `${stream}:dlq`)).map((e) => e.id);
    expect(printed).toEqual(ids.filter((id) => !left.includes(id)));
    expect((await readAll(redis, stream)).map((e) => e.fields.data)).toEqual(
      printed.map((id) => `{"n":${ids.indexOf(id)}}`),
    );
    expect(stderr).toContain(`Interrupted (test abort) after replaying ${printed.length}`);
    expect(stderr).toContain(`${left.length} still in "${stream}:dlq"`);
  });

  it('a write that fails mid-way: the replayed ids are printed, the failed one stays, exit 1', async () => {
    const dead = newKey('dead');
    const good = await sourceStream(redis);
    // A stream whose last id is the largest possible one: XADD * fails on it.
    const full = newKey('full');
    await redis.xadd(full, '18446744073709551615-18446744073709551615', 'data', 'last');
    const a = await addDeadLetter(redis, good, { data: 'a' }, {}, dead);
    const b = await addDeadLetter(redis, full, { data: 'b' }, {}, dead);
    const c = await addDeadLetter(redis, good, { data: 'c' }, {}, dead);
    const d = await addDeadLetter(redis, good, { data: 'd' }, {}, dead);

    const run = await dlq(['replay', 'orders', '--dlq', dead, a, b, c, d]);
    expect(run.code).toBe(1);
    const printed = replayedIds(run.stdout);
    const left = (await readAll(redis, dead)).map((e) => e.id);
    expect(left).toContain(b);
    expect(printed).toEqual([a, c, d].filter((id) => !left.includes(id)));
    expect(run.stderr).toContain('exhausted the last possible ID');
    expect(run.stderr).toContain(`after replaying ${printed.length}`);
    expect((await readAll(redis, good)).map((e) => e.fields.data)).toEqual(
      printed.map((id) => ({ [a]: 'a', [c]: 'c', [d]: 'd' })[id]),
    );
    expect(await redis.xlen(full)).toBe(1);
  });
});

describe('sba-dlq replay on SIGINT (a Redis of its own, paused)', () => {
  let server: DedicatedRedis;
  let redis: Redis;

  beforeAll(async () => {
    server = await startRedisServer();
    redis = new Redis(server.url);
  });

  afterAll(async () => {
    await redis?.call('CLIENT', 'UNPAUSE').catch(() => undefined);
    await redis?.quit();
    await server?.stop();
  });

  it('finishes the dead letters in flight, prints them, leaves the rest, exits 130', async () => {
    const stream = 'orders';
    await redis.xgroup('CREATE', stream, 'workers', '$', 'MKSTREAM');
    const ids = await addDeadLetters(redis, stream, 250);
    // Writes (the replay scripts) wait while Redis is paused; reads go on.
    await redis.call('CLIENT', 'PAUSE', 60_000, 'WRITE');
    const cli = spawnDlq(['replay', stream, '--all'], server.url);
    try {
      await waitFor('the replay waiting on its first scripts', async () =>
        ((await redis.call('CLIENT', 'LIST')) as string)
          .split('\n')
          .some((line) => / flags=b /.test(line) && / cmd=eval/.test(line)),
      );
      cli.child.kill('SIGINT');
      await waitFor('the CLI saying it stops', () => cli.output.stderr.includes('SIGINT'));
    } finally {
      await redis.call('CLIENT', 'UNPAUSE');
    }
    const code = await cli.exit;

    expect(code).toBe(130);
    const printed = replayedIds(cli.output.stdout);
    const left = (await readAll(redis, `${stream}:dlq`)).map((e) => e.id);
    expect(printed.length).toBeGreaterThan(0);
    expect(left.length).toBeGreaterThan(0);
    expect(printed).toEqual(ids.filter((id) => !left.includes(id)));
    expect(await redis.xlen(stream)).toBe(printed.length);
    expect(cli.output.stderr).toContain(`after replaying ${printed.length}`);
  });
});

describe('sba-dlq prints stored values with control characters escaped', () => {
  let redis: Redis;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('list, show and replay: no raw escape sequence, carriage return or C1 control', async () => {
    const stream = await sourceStream(redis);
    const hostile = '\x1b[2J\x1b]0;owned\x07\rfake\x00\x7f\u009b31m';
    const id = await addDeadLetter(
      redis,
      stream,
      { data: hostile, [`k\x1b[1A`]: 'v' },
      { error: `boom ${hostile}`, stack: `Error: ${hostile}\n    at x`, reason: hostile },
    );
    // eslint-disable-next-line no-control-regex
    const raw = /[\x00-\x09\x0b-\x1f\x7f-\x9f]/;

    const list = await dlqMain(['list', stream]);
    expect(list.code).toBe(0);
    expect(list.stdout).not.toMatch(raw);
    expect(list.stdout).toContain('\\x1b[2J');
    expect(list.stdout).toContain('\\r');

    const show = await dlqMain(['show', stream, id]);
    expect(show.code).toBe(0);
    expect(show.stdout).not.toMatch(raw);
    expect(show.stdout).toContain('  data = \\x1b[2J\\x1b]0;owned\\x07\\rfake\\x00\\x7f\\x9b31m\n');
    expect(show.stdout).toContain('  k\\x1b[1A = v\n');
    expect(show.stdout).toContain('error:          Error: boom \\x1b[2J');

    const json = await dlqMain(['show', stream, id, '--json']);
    expect(json.stdout).not.toMatch(raw);
    expect(JSON.parse(json.stdout)).toMatchObject({ fields: { data: hostile } });

    // The refusal reason quotes the stored stream name.
    const badSource = await addDeadLetter(redis, stream, { data: '1' }, { stream: `x\x1b[2J` });
    const replay = await dlq(['replay', stream, badSource]);
    expect(replay.code).toBe(1);
    expect(replay.stdout).not.toMatch(raw);
    expect(replay.stdout).toContain('x\\x1b[2J');
  });
});
