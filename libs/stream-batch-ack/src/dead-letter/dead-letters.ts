import type { Cluster, Redis } from 'ioredis';
import { describeError, StreamBatchAckError } from '../core/errors';
import { toRecord } from '../redis/group-info';
import { defaultDeadLetterStream, keySlot } from '../redis/keys';
import { LuaScript, registerScripts } from '@nest-redis-resilience/common';
import {
  DeadLetter,
  isStreamId,
  missingDeadLetterFields,
  parseDeadLetter,
} from './dead-letter-entry';

/**
 * replay-dead-letter-2: appends a dead letter's original fields to its stream and deletes the
 * dead letter, atomically; does nothing when the dead letter is gone (replayed or dropped by
 * someone else since it was read: stream entries never change, so one that exists is the one read).
 * Fails, writing nothing, when the stream is not (or no longer) a stream: XADD would create it.
 *   KEYS[1]  stream   KEYS[2]  dead-letter stream
 *   ARGV[1]  dead-letter id   ARGV[2..]  field, value, ... of the original entry
 * Returns the new entry id, or nil.
 */
export const REPLAY_DEAD_LETTER_LUA = `
if #redis.call('XRANGE', KEYS[2], ARGV[1], ARGV[1]) == 0 then return false end
if redis.call('TYPE', KEYS[1]).ok ~= 'stream' then
  return redis.error_reply('SBA_NOT_A_STREAM "' .. KEYS[1] .. '" is not a stream (any more); nothing was written to it')
end
local added = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 2))
redis.call('XDEL', KEYS[2], ARGV[1])
return added
`;

const REPLAY_SCRIPT: LuaScript = {
  name: 'sbaReplayDeadLetter',
  numberOfKeys: 2,
  lua: REPLAY_DEAD_LETTER_LUA,
};

type Client = Redis | Cluster;
interface ReplayScript {
  sbaReplayDeadLetter(
    stream: string,
    deadLetterStream: string,
    deadLetterId: string,
    ...fields: string[]
  ): Promise<string | null>;
}

/**
 * Bad input (`INVALID_ARGUMENT`), keys a Cluster can't use in one script (`CROSS_SLOT`), or a
 * replay stopped half-way by a Redis error or its `signal` (`INTERRUPTED`, with `result`: what it
 * had done, and `cause`).
 */
export class DeadLetterError extends StreamBatchAckError {
  constructor(
    code: 'INVALID_ARGUMENT' | 'CROSS_SLOT' | 'INTERRUPTED',
    message: string,
    /** `INTERRUPTED`: the dead letters replayed, missing and refused before the replay stopped. */
    readonly result?: ReplayResult,
    /** `INTERRUPTED`: the Redis error, or the signal's reason. */
    cause?: unknown,
  ) {
    super(code, message, { cause });
  }
}

export interface DeadLettersOptions {
  /** Name of the dead-letter stream of a stream; the server's `deadLetter.stream`. Default `${stream}:dlq`. */
  deadLetterStream?: (stream: string) => string;
}

export interface ListDeadLettersOptions {
  /** At most this many (default 100). */
  count?: number;
  /** Start at this dead-letter id (inclusive). */
  from?: string;
  /** Start after this dead-letter id: the last id of the previous page. */
  after?: string;
}

export interface ReplayOptions {
  /** Dead letters read and replayed per round trip (default 100). */
  chunkSize?: number;
  /**
   * Stops the replay before its next chunk (the chunk in flight finishes); it then rejects with
   * `DeadLetterError` `INTERRUPTED`, whose `result` says what was replayed.
   */
  signal?: AbortSignal;
  /** Called for each dead letter replayed, as soon as its chunk is done (to show progress). */
  onReplayed?: (replayed: ReplayedDeadLetter) => void;
}

/** A dead letter appended to its stream again (as `newId`) and deleted from the dead-letter stream. */
export interface ReplayedDeadLetter {
  deadLetterId: string;
  stream: string;
  id: string;
  newId: string;
}

export interface ReplayResult {
  replayed: ReplayedDeadLetter[];
  /** Requested dead-letter ids that are not (or no longer) in the dead-letter stream. */
  missing: string[];
  /**
   * Dead letters that can't be replayed (see `DeadLetter.problem`), or whose stream can't take
   * them (missing, not a stream, a dead-letter stream, not a stream whose dead letters go here);
   * they stay.
   */
  refused: { deadLetterId: string; reason: string }[];
}

/** How many entries at each end of a stream `inspectStream` looks at. */
const SAMPLE = 10;

/** What `inspectStream` found at a key. */
export interface StreamInspection {
  key: string;
  /** As `TYPE` says: `'none'` when the key does not exist. */
  type: string;
  /** Entries of the stream (0 when not a stream). */
  length: number;
  /** Among the first and last entries looked at, those without the dead-letter fields. */
  notDeadLetters: { id: string; missing: string[] }[];
  /** Consumer groups with entries delivered and not acknowledged: someone consumes the stream. */
  pendingGroups: { name: string; pending: number }[];
}

/**
 * Looks at a key without changing it: its type and, for a stream, its length, whether its first
 * and last entries are dead letters, and its consumer groups with pending entries.
 */
export async function inspectStream(client: Client, key: string): Promise<StreamInspection> {
  const type = String(await client.type(key));
  if (type !== 'stream') return { key, type, length: 0, notDeadLetters: [], pendingGroups: [] };
  const [length, first, last, groups] = await Promise.all([
    client.xlen(key),
    client.xrange(key, '-', '+', 'COUNT', SAMPLE),
    client.xrevrange(key, '+', '-', 'COUNT', SAMPLE),
    client.call('XINFO', 'GROUPS', key) as Promise<unknown[][]>,
  ]);
  const looked = new Map([...first, ...last]);
  return {
    key,
    type,
    length,
    notDeadLetters: [...looked]
      .map(([id, flat]) => ({ id, missing: missingDeadLetterFields(flat) }))
      .filter((e) => e.missing.length > 0),
    pendingGroups: groups
      .map(toRecord)
      .map((g) => ({ name: String(g.name), pending: Number(g.pending ?? 0) }))
      .filter((g) => g.pending > 0),
  };
}

/** Why an inspected stream does not look like a dead-letter stream of this library; [] when it does. */
export function deadLetterStreamDoubts(info: StreamInspection): string[] {
  const doubts = info.pendingGroups.map(
    (g) => `consumer group "${g.name}" has ${g.pending} pending entries (it is being consumed)`,
  );
  const [first] = info.notDeadLetters;
  if (first)
    doubts.push(
      `${info.notDeadLetters.length} of its first and last ${SAMPLE} entries are not dead letters ` +
        `(entry ${first.id} lacks the dead-letter fields ${first.missing.map((f) => `"${f}"`).join(', ')})`,
    );
  return doubts;
}

interface ReplayRun {
  dlq: string;
  result: ReplayResult;
  /** Per stream the dead letters name: why they can't go back there, or null. */
  targets: Map<string, Promise<string | null>>;
  onReplayed?: (replayed: ReplayedDeadLetter) => void;
}

/**
 * Lists, replays and drops the dead letters of streams consumed by ServerRedisStreams, on an
 * ioredis `Redis` or `Cluster` client that the caller owns (and closes).
 */
export class DeadLetters {
  private readonly deadLetterStream: (stream: string) => string;

  constructor(
    private readonly client: Client,
    options: DeadLettersOptions = {},
  ) {
    this.deadLetterStream = options.deadLetterStream ?? defaultDeadLetterStream;
  }

  /**
   * On the command connection of a started (listening) ServerRedisStreams, with the server's
   * `deadLetter.stream` names. The server owns that connection and closes it.
   */
  static fromServer(server: {
    unwrap<T>(): T;
    options: { deadLetter: { stream: (stream: string) => string } };
  }): DeadLetters {
    const [, commands] = server.unwrap<[Client, Client]>();
    return new DeadLetters(commands, { deadLetterStream: server.options.deadLetter.stream });
  }

  /** Dead letters of `stream`, oldest first; `[]` when it has none (or no dead-letter stream). */
  async list(stream: string, options: ListDeadLettersOptions = {}): Promise<DeadLetter[]> {
    const count = positiveInteger('count', options.count ?? 100);
    if (options.from !== undefined && options.after !== undefined)
      throw new DeadLetterError('INVALID_ARGUMENT', 'Pass "from" or "after", not both.');
    const start =
      options.after !== undefined
        ? `(${checkId(options.after)}`
        : options.from !== undefined
          ? checkId(options.from)
          : '-';
    const rows = await this.client.xrange(
      this.deadLetterStream(stream),
      start,
      '+',
      'COUNT',
      count,
    );
    return rows.map(([id, flat]) => parseDeadLetter(id, flat, stream));
  }

  /** One dead letter of `stream`, or null. */
  async get(stream: string, deadLetterId: string): Promise<DeadLetter | null> {
    const id = checkId(deadLetterId);
    const rows = await this.client.xrange(this.deadLetterStream(stream), id, id);
    return rows.length > 0 ? parseDeadLetter(rows[0][0], rows[0][1], stream) : null;
  }

  /** How many dead letters `stream` has. */
  count(stream: string): Promise<number> {
    return this.client.xlen(this.deadLetterStream(stream));
  }

  /**
   * Appends the original fields of each dead letter to the stream it came from (a new entry, which
   * the consumer groups deliver as a new message) and deletes the dead letter: one atomic script
   * per dead letter. Only into a stream that exists, is a stream, is not a dead-letter stream and
   * has its dead letters here; other dead letters are `refused`. `'all'` replays the dead letters
   * present when the call starts, in chunks. A Redis error or `signal` stops the replay with
   * `INTERRUPTED` and the partial result; it is safe to run again (replayed dead letters are gone).
   */
  async replay(
    stream: string,
    which: readonly string[] | 'all',
    options: ReplayOptions = {},
  ): Promise<ReplayResult> {
    const dlq = this.deadLetterStream(stream);
    this.checkSlots(stream, dlq);
    const chunkSize = positiveInteger('chunkSize', options.chunkSize ?? 100);
    const ids = which === 'all' ? which : checkIds(which);
    const result: ReplayResult = { replayed: [], missing: [], refused: [] };
    const run: ReplayRun = { dlq, result, targets: new Map(), onReplayed: options.onReplayed };
    try {
      const pages =
        ids === 'all'
          ? this.pages(stream, dlq, chunkSize)
          : this.idPages(stream, ids, chunkSize, result);
      for await (const page of pages) {
        options.signal?.throwIfAborted();
        await this.replayPage(run, page);
      }
    } catch (err) {
      throw new DeadLetterError(
        'INTERRUPTED',
        `Replay from "${dlq}" stopped after replaying ${result.replayed.length} dead letter(s): ${describeError(err)}. ` +
          'Those in result.replayed were appended to their streams and deleted from the dead-letter stream; ' +
          'the others are still there: replay again to go on.',
        result,
        err,
      );
    }
    return result;
  }

  /** Deletes dead letters of `stream` (`'all'`: those present when the call starts); returns how many. */
  async drop(stream: string, which: readonly string[] | 'all'): Promise<number> {
    const dlq = this.deadLetterStream(stream);
    let dropped = 0;
    if (which === 'all') {
      for await (const page of this.pages(stream, dlq, 1000))
        dropped += await this.client.xdel(dlq, ...page.map((d) => d.deadLetterId));
      return dropped;
    }
    const ids = checkIds(which);
    for (let i = 0; i < ids.length; i += 1000)
      dropped += await this.client.xdel(dlq, ...ids.slice(i, i + 1000));
    return dropped;
  }

  /** The requested dead letters, `size` ids at a time; ids not found go to `result.missing`. */
  private async *idPages(
    stream: string,
    ids: string[],
    size: number,
    result: ReplayResult,
  ): AsyncGenerator<DeadLetter[]> {
    for (let i = 0; i < ids.length; i += size) {
      const chunk = ids.slice(i, i + size);
      const found = await Promise.all(chunk.map((id) => this.get(stream, id)));
      chunk.forEach((id, j) => {
        if (!found[j]) result.missing.push(id);
      });
      yield found.filter((d): d is DeadLetter => d !== null);
    }
  }

  /**
   * Replays one page; every dead letter of it ends up in `run.result` (or, when its script failed,
   * stays in the dead-letter stream), and the first script error is thrown after that.
   */
  private async replayPage(run: ReplayRun, page: DeadLetter[]): Promise<void> {
    const refusals = await Promise.all(
      page.map((d) =>
        d.problem ? `${d.problem}. Inspect it, then drop it` : this.targetProblem(run, d.stream),
      ),
    );
    const script = this.script();
    // Pipelined: sent without waiting for each other, run by Redis in order.
    const outcomes = await Promise.allSettled(
      page.map((d, i) =>
        refusals[i] !== null
          ? Promise.resolve(undefined)
          : script.sbaReplayDeadLetter(
              d.stream,
              run.dlq,
              d.deadLetterId,
              ...Object.entries(d.fields).flat(),
            ),
      ),
    );
    let failure: { error: unknown } | undefined;
    page.forEach((d, i) => {
      const refusal = refusals[i];
      const outcome = outcomes[i];
      if (refusal !== null)
        run.result.refused.push({
          deadLetterId: d.deadLetterId,
          reason: `Dead letter ${d.deadLetterId} of "${run.dlq}" can't be replayed: ${refusal}.`,
        });
      else if (outcome.status === 'rejected') failure ??= { error: outcome.reason };
      else if (!outcome.value) run.result.missing.push(d.deadLetterId);
      else {
        const replayed = {
          deadLetterId: d.deadLetterId,
          stream: d.stream,
          id: d.id,
          newId: outcome.value,
        };
        run.result.replayed.push(replayed);
        run.onReplayed?.(replayed);
      }
    });
    if (failure) throw failure.error;
  }

  private targetProblem(run: ReplayRun, target: string): Promise<string | null> {
    let problem = run.targets.get(target);
    if (!problem) run.targets.set(target, (problem = this.checkTarget(target, run.dlq)));
    return problem;
  }

  /** Why a dead letter of `dlq` naming `target` as its stream can't go back there, or null. */
  private async checkTarget(target: string, dlq: string): Promise<string | null> {
    const its = `its stream "${target}"`;
    if (target === dlq) return `${its} is this dead-letter stream itself. Drop it`;
    const own = this.deadLetterStream(target);
    if (own !== dlq)
      return `it came from "${target}", whose dead letters go to "${own}", not to "${dlq}". Replay it from there, or drop it`;
    if (this.client.isCluster && keySlot(target) !== keySlot(dlq))
      return `${its} and "${dlq}" are in different Redis Cluster hash slots, so it can't be replayed atomically`;
    const info = await inspectStream(this.client, target);
    if (info.type === 'none')
      return `${its} does not exist, and replay does not create streams. Create it (and its consumer groups), then replay again`;
    if (info.type !== 'stream') return `${its} is a ${info.type}, not a stream`;
    if (info.length > 0 && info.notDeadLetters.length === 0)
      return `${its} holds dead letters (it is a dead-letter stream, not a stream of messages). Drop it`;
    return null;
  }

  /**
   * The dead letters present now, `size` at a time. The end is fixed first, so that entries added
   * meanwhile (a replayed message failing again) are left for the next call instead of looping.
   */
  private async *pages(stream: string, dlq: string, size: number): AsyncGenerator<DeadLetter[]> {
    const last = await this.client.xrevrange(dlq, '+', '-', 'COUNT', 1);
    if (last.length === 0) return;
    const end = last[0][0];
    let start = '-';
    for (;;) {
      const rows = await this.client.xrange(dlq, start, end, 'COUNT', size);
      if (rows.length > 0) yield rows.map(([id, flat]) => parseDeadLetter(id, flat, stream));
      if (rows.length < size) return;
      start = `(${rows[rows.length - 1][0]}`;
    }
  }

  private script(): Client & ReplayScript {
    return registerScripts<ReplayScript, Client>(this.client, [REPLAY_SCRIPT]);
  }

  /** On a Cluster, the replay script touches a stream and its dead-letter stream: one slot. */
  private checkSlots(stream: string, dlq: string): void {
    if (!this.client.isCluster || keySlot(stream) === keySlot(dlq)) return;
    throw new DeadLetterError(
      'CROSS_SLOT',
      `Redis Cluster: stream "${stream}" and its dead-letter stream "${dlq}" are in different hash slots, ` +
        `so a dead letter can't be replayed atomically. Give the stream a hash tag (e.g. "{${stream}}", ` +
        `whose default dead-letter stream is "{${stream}}:dlq"), or a deadLetterStream function that keeps the tag.`,
    );
  }
}

function checkId(id: string): string {
  if (!isStreamId(id))
    throw new DeadLetterError(
      'INVALID_ARGUMENT',
      `"${id}" is not a stream entry id (expected <ms>-<seq>, e.g. 1700000000000-0).`,
    );
  return id;
}

function checkIds(ids: readonly string[]): string[] {
  return [...new Set(ids.map(checkId))];
}

function positiveInteger(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1)
    throw new DeadLetterError(
      'INVALID_ARGUMENT',
      `"${name}" must be a positive integer, got ${value}.`,
    );
  return value;
}
