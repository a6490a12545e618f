import type { Cluster, Redis } from 'ioredis';
import { StreamBatchAckError } from '../core/errors';
import { defaultDeadLetterStream, keySlot } from '../redis/keys';
import { DeadLetter, isStreamId, parseDeadLetter } from './dead-letter-entry';

/**
 * replay-dead-letter-1: appends a dead letter's original fields to its stream and deletes the
 * dead letter, atomically; does nothing when the dead letter is gone (replayed or dropped by
 * someone else since it was read: stream entries never change, so one that exists is the one read).
 *   KEYS[1]  stream   KEYS[2]  dead-letter stream
 *   ARGV[1]  dead-letter id   ARGV[2..]  field, value, ... of the original entry
 * Returns the new entry id, or nil.
 */
export const REPLAY_DEAD_LETTER_LUA = `
if #redis.call('XRANGE', KEYS[2], ARGV[1], ARGV[1]) == 0 then return false end
local added = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 2))
redis.call('XDEL', KEYS[2], ARGV[1])
return added
`;

type Client = Redis | Cluster;
interface ReplayScript {
  sbaReplayDeadLetter(
    stream: string,
    deadLetterStream: string,
    deadLetterId: string,
    ...fields: string[]
  ): Promise<string | null>;
}

/** Bad input (`INVALID_ARGUMENT`), or keys a Cluster can't use in one script (`CROSS_SLOT`). */
export class DeadLetterError extends StreamBatchAckError {
  constructor(code: 'INVALID_ARGUMENT' | 'CROSS_SLOT', message: string) {
    super(code, message);
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
}

export interface ReplayResult {
  replayed: { deadLetterId: string; stream: string; id: string; newId: string }[];
  /** Requested dead-letter ids that are not (or no longer) in the dead-letter stream. */
  missing: string[];
  /** Dead letters that can't be replayed (see `DeadLetter.problem`); they stay. */
  refused: { deadLetterId: string; reason: string }[];
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
   * Appends the original fields of each dead letter to its stream again (a new entry, which the
   * consumer groups deliver as a new message) and deletes the dead letter: one atomic script per
   * dead letter. `'all'` replays the dead letters present when the call starts, in chunks. A Redis
   * error stops the replay; it is safe to run again (replayed dead letters are gone).
   */
  async replay(
    stream: string,
    which: readonly string[] | 'all',
    options: ReplayOptions = {},
  ): Promise<ReplayResult> {
    const dlq = this.deadLetterStream(stream);
    this.checkSlots(stream, dlq);
    const chunkSize = positiveInteger('chunkSize', options.chunkSize ?? 100);
    const result: ReplayResult = { replayed: [], missing: [], refused: [] };
    if (which === 'all') {
      for await (const page of this.pages(stream, dlq, chunkSize))
        await this.replayPage(dlq, page, result);
      return result;
    }
    const ids = checkIds(which);
    for (let i = 0; i < ids.length; i += chunkSize) {
      const chunk = ids.slice(i, i + chunkSize);
      const found = await Promise.all(chunk.map((id) => this.get(stream, id)));
      chunk.forEach((id, j) => {
        if (!found[j]) result.missing.push(id);
      });
      await this.replayPage(
        dlq,
        found.filter((d): d is DeadLetter => d !== null),
        result,
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

  private async replayPage(dlq: string, page: DeadLetter[], result: ReplayResult): Promise<void> {
    const replayable = page.filter((d) => !d.problem);
    for (const d of replayable) this.checkSlots(d.stream, dlq);
    const script = this.script();
    // Pipelined: sent without waiting for each other, run by Redis in order.
    const newIds = await Promise.all(
      replayable.map((d) =>
        script.sbaReplayDeadLetter(
          d.stream,
          dlq,
          d.deadLetterId,
          ...Object.entries(d.fields).flat(),
        ),
      ),
    );
    for (const d of page) {
      if (d.problem) {
        result.refused.push({
          deadLetterId: d.deadLetterId,
          reason: `Dead letter ${d.deadLetterId} of "${dlq}" can't be replayed: ${d.problem}. Inspect it, then drop it.`,
        });
        continue;
      }
      const newId = newIds[replayable.indexOf(d)];
      if (newId === null) result.missing.push(d.deadLetterId);
      else
        result.replayed.push({ deadLetterId: d.deadLetterId, stream: d.stream, id: d.id, newId });
    }
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
    const client = this.client as Client & Partial<ReplayScript>;
    if (!client.sbaReplayDeadLetter)
      this.client.defineCommand('sbaReplayDeadLetter', {
        numberOfKeys: 2,
        lua: REPLAY_DEAD_LETTER_LUA,
      });
    return this.client as Client & ReplayScript;
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
