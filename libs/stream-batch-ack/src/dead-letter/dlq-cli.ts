#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { describeError } from '../core/errors';
import { partitionCountKey, partitionStreams } from '../partitions/partition-layout';
import { closeClient, createRedisClient } from '../redis/connection';
import { defaultDeadLetterStream } from '../redis/keys';
import { DeadLetter, isStreamId } from './dead-letter-entry';
import {
  DeadLetterError,
  deadLetterStreamDoubts,
  DeadLetters,
  inspectStream,
  ReplayedDeadLetter,
  ReplayResult,
} from './dead-letters';

export const USAGE = `Usage: sba-dlq <command> <stream> [options]

  sba-dlq list   <stream> [--count N] [--after ID]   dead letters, oldest first (default 100)
  sba-dlq show   <stream> <dead-letter-id>            one dead letter in full
  sba-dlq replay <stream> <dead-letter-id...|--all>   append the original entries to their stream again
  sba-dlq drop   <stream> <dead-letter-id...|--all>   delete dead letters

Options:
  --redis URL   Redis to connect to (default: $REDIS_URL or redis://127.0.0.1:6379)
  --dlq KEY     the dead-letter stream, when not the default <stream>:dlq
  --force       replay / drop even though the dead-letter stream does not look like one
                (a consumer group has pending entries, or entries lack the dead-letter fields)
  --json        print JSON
  -h, --help    this help

replay writes each dead letter only into the stream it came from (its "stream" field), when
that stream exists, is a stream and is not a dead-letter stream; it refuses the others. Ctrl-C
stops it after the dead letters in flight and prints what was replayed.

A partitioned stream has one dead-letter stream per partition: give the partition's stream
(ticks:{0.1}); with the logical name, the command lists the partitions and their dead letters.

Exit codes: 0 done, 1 failed (or some dead letters not found / not replayable), 2 bad usage
(or not a dead-letter stream), 130 stopped by Ctrl-C.
`;

export interface DlqCommand {
  command: 'list' | 'show' | 'replay' | 'drop';
  stream: string;
  /** `show`: one id; `replay` / `drop`: the ids or 'all'; `list`: []. */
  ids: string[] | 'all';
  count: number;
  after?: string;
  redis: string;
  deadLetterStream?: string;
  json: boolean;
  /** `replay` / `drop`: go on when the dead-letter stream does not look like one. */
  force?: boolean;
}

export class UsageError extends Error {}

/** Parses the command line (without `node script`); throws UsageError; `'help'` for --help. */
export function parseDlqArgs(
  argv: readonly string[],
  env: Record<string, string | undefined> = process.env,
): DlqCommand | 'help' {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: {
        redis: { type: 'string' },
        dlq: { type: 'string' },
        json: { type: 'boolean' },
        count: { type: 'string' },
        after: { type: 'string' },
        all: { type: 'boolean' },
        force: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    throw new UsageError(describeError(err));
  }
  const { values, positionals } = parsed;
  if (values.help) return 'help';
  const [command, stream, ...ids] = positionals;
  if (!command) throw new UsageError('Missing command.');
  if (command !== 'list' && command !== 'show' && command !== 'replay' && command !== 'drop')
    throw new UsageError(`Unknown command "${command}".`);
  if (!stream) throw new UsageError(`"${command}" needs a stream.`);
  for (const id of ids)
    if (!isStreamId(id))
      throw new UsageError(`"${id}" is not a dead-letter id (like 1700000000000-0).`);
  if (command !== 'list' && (values.count !== undefined || values.after !== undefined))
    throw new UsageError('--count and --after go with "list" only.');
  if (values.all && command !== 'replay' && command !== 'drop')
    throw new UsageError('--all goes with "replay" and "drop" only.');
  if (values.force && command !== 'replay' && command !== 'drop')
    throw new UsageError('--force goes with "replay" and "drop" only.');

  const common = {
    command,
    stream,
    count: 100,
    redis: values.redis ?? env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    json: values.json ?? false,
    ...(values.dlq !== undefined ? { deadLetterStream: values.dlq } : {}),
    ...(values.force ? { force: true } : {}),
  } as const;
  switch (command) {
    case 'list': {
      if (ids.length > 0) throw new UsageError('"list" takes only a stream (page with --after).');
      const count = Number(values.count ?? 100);
      if (!Number.isInteger(count) || count < 1)
        throw new UsageError(`--count must be a positive integer, got "${values.count}".`);
      if (values.after !== undefined && !isStreamId(values.after))
        throw new UsageError(`--after "${values.after}" is not a dead-letter id.`);
      return { ...common, ids: [], count, ...(values.after ? { after: values.after } : {}) };
    }
    case 'show':
      if (ids.length !== 1) throw new UsageError('"show" takes a stream and one dead-letter id.');
      return { ...common, ids };
    default:
      if (values.all && ids.length > 0)
        throw new UsageError('Give dead-letter ids or --all, not both.');
      if (!values.all && ids.length === 0)
        throw new UsageError(`"${command}" needs dead-letter ids or --all.`);
      return { ...common, ids: values.all ? 'all' : ids };
  }
}

export interface DlqIo {
  out(text: string): void;
  err(text: string): void;
  env: Record<string, string | undefined>;
  /** Stops a replay after the dead letters in flight; the process's own io uses SIGINT/SIGTERM. */
  signal?: AbortSignal;
}

const processIo: DlqIo = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  env: process.env,
};

/** Runs the CLI; resolves with the exit code. */
export async function main(argv: readonly string[], io: DlqIo = processIo): Promise<number> {
  let cmd: DlqCommand | 'help';
  try {
    cmd = parseDlqArgs(argv, io.env);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.err(`dlq: ${err.message}\n\n${USAGE}`);
    return 2;
  }
  if (cmd === 'help') {
    io.out(USAGE);
    return 0;
  }
  // No reconnecting and no queueing: a CLI should fail at once when Redis is unreachable.
  const redis = createRedisClient(cmd.redis, {
    lazyConnect: true,
    enableOfflineQueue: false,
    retryStrategy: () => null,
    connectTimeout: 5000,
  });
  // connect() rejects with "Connection is closed"; the cause comes as an 'error' event.
  let cause: unknown;
  redis.on('error', (err: unknown) => (cause ??= err));
  try {
    await redis.connect();
  } catch (err) {
    io.err(
      `dlq: cannot connect to ${escapeControl(redactUrl(cmd.redis))}: ${escapeControl(describeError(cause ?? err))}\n`,
    );
    closeClient(redis).catch(() => undefined);
    return 1;
  }
  try {
    const { deadLetterStream } = cmd;
    if (!deadLetterStream) {
      const partitioned = await partitionsOf(redis, cmd.stream);
      if (partitioned) {
        io.err(partitionedText(cmd, partitioned));
        return 2;
      }
    }
    const dlq = deadLetterStream ?? defaultDeadLetterStream(cmd.stream);
    if (cmd.command === 'replay' || cmd.command === 'drop') {
      const stop = await checkDeadLetterStream(redis, dlq, cmd, io);
      if (stop !== undefined) return stop;
    }
    const deadLetters = new DeadLetters(redis, {
      deadLetterStream: deadLetterStream ? () => deadLetterStream : defaultDeadLetterStream,
    });
    return await run(cmd, deadLetters, io, dlq);
  } catch (err) {
    io.err(`dlq: ${escapeControl(describeError(err))}\n`);
    return 1;
  } finally {
    await closeClient(redis);
  }
}

/**
 * Before `replay` and `drop`: whether `dlq` is a dead-letter stream of this library, so that a
 * wrong `--dlq` can't empty a stream in use. Undefined to go on, else the exit code.
 */
async function checkDeadLetterStream(
  redis: CliRedis,
  dlq: string,
  cmd: DlqCommand,
  io: DlqIo,
): Promise<number | undefined> {
  const info = await inspectStream(redis, dlq);
  const name = `"${escapeControl(dlq)}"`;
  if (info.type === 'none' || (info.type === 'stream' && info.length === 0)) {
    const missing = cmd.ids === 'all' ? [] : cmd.ids;
    if (cmd.json)
      io.out(
        jsonText(cmd.command === 'drop' ? { dropped: 0 } : { replayed: [], missing, refused: [] }),
      );
    else
      io.out(
        `${name} ${info.type === 'none' ? 'does not exist' : 'is empty'}: nothing to do.\n` +
          (missing.length > 0 ? `Not found: ${missing.join(' ')}\n` : ''),
      );
    return missing.length > 0 ? 1 : 0;
  }
  if (info.type !== 'stream') {
    io.err(
      `dlq: ${name} is a ${info.type}, not a stream: it holds no dead letters. Check the stream name (and --dlq).\n`,
    );
    return 2;
  }
  const doubts = deadLetterStreamDoubts(info);
  if (doubts.length === 0) return undefined;
  const found = escapeControl(
    `it does not look like a dead-letter stream of stream-batch-ack: ${doubts.join('; ')}.`,
  );
  if (cmd.force) {
    io.err(`dlq: --force: going on with ${name}, although ${found}\n`);
    return undefined;
  }
  io.err(
    `dlq: refusing to ${cmd.command} the entries of ${name}: ${found}\n` +
      'Check the stream name (and --dlq). If it really is a dead-letter stream, run the command again with --force.\n',
  );
  return 2;
}

/** Exit codes of a replay stopped by a signal (128 + its number). */
const SIGNAL_EXIT: Record<string, number> = { SIGINT: 130, SIGTERM: 143 };

/**
 * The signal that stops a replay: `io.signal`, or for the process's own io, the first SIGINT or
 * SIGTERM (a second one ends the process at once, as usual).
 */
function interruption(io: DlqIo): { signal?: AbortSignal; dispose(): void } {
  if (io.signal || io !== processIo) return { signal: io.signal, dispose: () => undefined };
  const controller = new AbortController();
  const stop = (name: NodeJS.Signals) => {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    io.err(`dlq: ${name}: stopping after the dead letters in flight (again to quit at once)...\n`);
    controller.abort(new SignalError(name));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
    },
  };
}

class SignalError extends Error {}

type CliRedis = ReturnType<typeof createRedisClient>;

/** The partitions of `stream` with their dead-letter counts, when it is a partitioned stream. */
async function partitionsOf(
  redis: CliRedis,
  stream: string,
): Promise<{ stream: string; deadLetters: number }[] | undefined> {
  const stored = await redis.get(partitionCountKey(stream));
  const count = Number(stored);
  if (stored === null || !Number.isInteger(count) || count < 1) return undefined;
  const streams = partitionStreams(stream, count);
  const counts = await Promise.all(streams.map((p) => redis.xlen(defaultDeadLetterStream(p))));
  return streams.map((p, i) => ({ stream: p, deadLetters: counts[i] }));
}

function partitionedText(
  cmd: DlqCommand,
  partitions: { stream: string; deadLetters: number }[],
): string {
  const rows = partitions.map((p) => [
    p.stream,
    defaultDeadLetterStream(p.stream),
    `${p.deadLetters}`,
  ]);
  return (
    `dlq: "${cmd.stream}" is a partitioned stream (${partitions.length} partitions), with one dead-letter stream per partition:\n` +
    table(['partition', 'dead-letter stream', 'dead letters'], rows) +
    `Run the command on a partition, for example: dlq ${cmd.command} '${partitions[0].stream}'\n`
  );
}

async function run(cmd: DlqCommand, dl: DeadLetters, io: DlqIo, dlq: string): Promise<number> {
  const print = (value: unknown) => io.out(jsonText(value));
  switch (cmd.command) {
    case 'list': {
      // One more than asked, to know whether there is a next page.
      const rows = await dl.list(cmd.stream, { count: cmd.count + 1, after: cmd.after });
      const page = rows.slice(0, cmd.count);
      if (cmd.json) print(page);
      else io.out(listText(page, rows.length > cmd.count, cmd, dlq, await dl.count(cmd.stream)));
      return 0;
    }
    case 'show': {
      const d = await dl.get(cmd.stream, cmd.ids[0]);
      if (!d) {
        io.err(`dlq: no dead letter ${cmd.ids[0]} in "${escapeControl(dlq)}".\n`);
        return 1;
      }
      io.out(cmd.json ? jsonText(d) : showText(d));
      return 0;
    }
    case 'replay': {
      const { signal, dispose } = interruption(io);
      try {
        const result = await dl.replay(cmd.stream, cmd.ids, {
          signal,
          // Printed as they are done, so that what was replayed is on the screen whatever happens.
          onReplayed: cmd.json ? undefined : (r) => io.out(replayedLine(r)),
        });
        if (cmd.json) io.out(jsonText(result));
        else io.out(replayText(result, dlq));
        return result.missing.length + result.refused.length > 0 ? 1 : 0;
      } catch (err) {
        if (!(err instanceof DeadLetterError && err.code === 'INTERRUPTED' && err.result))
          throw err;
        const why = describeError(err.cause);
        const left = await dl.count(cmd.stream).catch(() => undefined);
        if (cmd.json) io.out(jsonText({ ...err.result, interrupted: why }));
        else io.out(replayText(err.result, dlq));
        io.err(
          escapeControl(
            `dlq: Interrupted (${why}) after replaying ${err.result.replayed.length} dead letter(s)` +
              `${cmd.json ? '' : ', listed above'}: each was appended to its stream and deleted from "${dlq}"; ` +
              `the others were not replayed${left === undefined ? '' : ` (${left} still in "${dlq}")`}. ` +
              'Run the command again to replay the rest: replayed dead letters are gone, so none is replayed twice.',
          ) + '\n',
        );
        if (!signal?.aborted) return 1;
        return err.cause instanceof SignalError ? (SIGNAL_EXIT[err.cause.message] ?? 130) : 130;
      } finally {
        dispose();
      }
    }
    case 'drop': {
      const dropped = await dl.drop(cmd.stream, cmd.ids);
      if (cmd.json) print({ dropped });
      else io.out(`Dropped ${dropped} dead letter(s) from "${escapeControl(dlq)}".\n`);
      return 0;
    }
  }
}

function listText(
  page: DeadLetter[],
  more: boolean,
  cmd: DlqCommand,
  dlq: string,
  total: number,
): string {
  if (page.length === 0)
    return `No dead letters in "${escapeControl(dlq)}"${cmd.after ? ` after ${cmd.after}` : ''}.\n`;
  const rows = page.map((d) => [
    d.deadLetterId,
    d.id,
    d.reason,
    String(d.deliveries),
    d.failedAt,
    oneLine(d.problem ? `(${d.problem})` : d.error, 60),
  ]);
  let text = table(
    ['DEAD-LETTER ID', 'ORIGINAL ID', 'REASON', 'DELIVERIES', 'FAILED AT', 'ERROR'],
    rows,
  );
  text += `\n${page.length} shown, ${total} in "${escapeControl(dlq)}".\n`;
  if (more)
    text += `Next page: dlq list ${escapeControl(cmd.stream)} --count ${cmd.count} --after ${page[page.length - 1].deadLetterId}\n`;
  return text;
}

function showText(d: DeadLetter): string {
  const lines: [string, string][] = [
    ['dead-letter id', d.deadLetterId],
    ['stream', d.stream],
    ['original id', d.id],
    ['group', d.group],
    ['consumer', d.consumer],
    ['deliveries', String(d.deliveries)],
    ['reason', d.reason],
    ['failed at', d.failedAt],
    ['error', `${d.errorName}: ${d.error}`],
  ];
  if (d.problem) lines.push(['problem', `${d.problem} (it can't be replayed)`]);
  // Multi-line values (an error message, the stack) keep their lines, indented; every other
  // control character, in them and in the fields, is shown escaped.
  const indent = ' '.repeat(16);
  let text = '';
  for (const [name, value] of lines)
    text += `${name}:`.padEnd(16) + indentedLines(value, indent) + '\n';
  text += 'fields:\n';
  for (const [name, value] of Object.entries(d.fields))
    text += `  ${escapeControl(name)} = ${escapeControl(value)}\n`;
  if (d.stack) text += `stack:\n  ${indentedLines(d.stack, '  ')}\n`;
  return text;
}

function replayedLine(r: ReplayedDeadLetter): string {
  return `replayed ${r.deadLetterId} -> ${escapeControl(r.stream)} ${r.newId} (was ${escapeControl(r.id)})\n`;
}

/** The end of a replay's report (the replayed dead letters were printed as they went). */
function replayText(result: ReplayResult, dlq: string): string {
  let text = '';
  for (const id of result.missing) text += `missing  ${id}: not in "${escapeControl(dlq)}"\n`;
  for (const r of result.refused)
    text += `refused  ${r.deadLetterId}: ${escapeControl(r.reason)}\n`;
  return (
    text +
    `Replayed ${result.replayed.length}, missing ${result.missing.length}, refused ${result.refused.length}.\n`
  );
}

function table(header: string[], rows: string[][]): string {
  rows = rows.map((r) => r.map(escapeControl));
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]))
      .join('  ')
      .trimEnd() + '\n';
  return line(header) + rows.map(line).join('');
}

function oneLine(text: string, max: number): string {
  const flat = escapeControl(text).replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** Each line of `text` escaped, joined by a newline and `indent`. */
function indentedLines(text: string, indent: string): string {
  return text.split('\n').map(escapeControl).join(`\n${indent}`);
}

// C0 controls, DEL, C1 controls (\x9b is a one-byte CSI for many terminals), and the Unicode
// bidirectional controls, which reorder what is shown.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
// What JSON.stringify leaves raw of those (it escapes C0 controls; its own newlines stay).
const CONTROL_IN_JSON = /[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * `text` with its control characters shown as escapes (`\n`, `\r`, `\t`, `\x1b`, `\x9b`, `\u202e`),
 * so that a stored value printed by the CLI can't move the cursor, clear or retitle the terminal,
 * or make other text look different. Other characters, backslashes included, are kept as they are.
 */
export function escapeControl(text: string): string {
  return text.replace(CONTROL, (c) => {
    const code = c.charCodeAt(0);
    return (
      NAMED[c] ??
      (code < 0x100
        ? `\\x${code.toString(16).padStart(2, '0')}`
        : `\\u${code.toString(16).padStart(4, '0')}`)
    );
  });
}

/**
 * JSON of `value`, with the characters JSON.stringify leaves raw that a terminal may act on (DEL,
 * C1 and bidirectional controls) written as `\u` escapes: the same JSON value, safe to print.
 */
export function jsonText(value: unknown): string {
  return (
    JSON.stringify(value, null, 2).replace(
      CONTROL_IN_JSON,
      (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
    ) + '\n'
  );
}

function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url;
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => (process.exitCode = code),
    (err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
