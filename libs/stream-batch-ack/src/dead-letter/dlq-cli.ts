#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { describeError } from '../core/errors';
import { partitionCountKey, partitionStreams } from '../partitions/partition-layout';
import { closeClient, createRedisClient } from '../redis/connection';
import { defaultDeadLetterStream } from '../redis/keys';
import { DeadLetter, isStreamId } from './dead-letter-entry';
import { DeadLetters, ReplayResult } from './dead-letters';

export const USAGE = `Usage: sba-dlq <command> <stream> [options]

  sba-dlq list   <stream> [--count N] [--after ID]   dead letters, oldest first (default 100)
  sba-dlq show   <stream> <dead-letter-id>            one dead letter in full
  sba-dlq replay <stream> <dead-letter-id...|--all>   append the original entries to <stream> again
  sba-dlq drop   <stream> <dead-letter-id...|--all>   delete dead letters

Options:
  --redis URL   Redis to connect to (default: $REDIS_URL or redis://127.0.0.1:6379)
  --dlq KEY     the dead-letter stream, when not the default <stream>:dlq
  --json        print JSON
  -h, --help    this help

A partitioned stream has one dead-letter stream per partition: give the partition's stream
(ticks:{0.1}); with the logical name, the command lists the partitions and their dead letters.

Exit codes: 0 done, 1 failed (or some dead letters not found / not replayable), 2 bad usage.
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

  const common = {
    command,
    stream,
    count: 100,
    redis: values.redis ?? env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    json: values.json ?? false,
    ...(values.dlq !== undefined ? { deadLetterStream: values.dlq } : {}),
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
    io.err(`dlq: cannot connect to ${redactUrl(cmd.redis)}: ${describeError(cause ?? err)}\n`);
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
    const deadLetters = new DeadLetters(redis, {
      deadLetterStream: deadLetterStream ? () => deadLetterStream : defaultDeadLetterStream,
    });
    return await run(cmd, deadLetters, io, deadLetterStream ?? defaultDeadLetterStream(cmd.stream));
  } catch (err) {
    io.err(`dlq: ${describeError(err)}\n`);
    return 1;
  } finally {
    await closeClient(redis);
  }
}

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
  const print = (value: unknown) => io.out(`${JSON.stringify(value, null, 2)}\n`);
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
        io.err(`dlq: no dead letter ${cmd.ids[0]} in "${dlq}".\n`);
        return 1;
      }
      io.out(cmd.json ? `${JSON.stringify(d, null, 2)}\n` : showText(d));
      return 0;
    }
    case 'replay': {
      const result = await dl.replay(cmd.stream, cmd.ids);
      if (cmd.json) print(result);
      else io.out(replayText(result, dlq));
      return result.missing.length + result.refused.length > 0 ? 1 : 0;
    }
    case 'drop': {
      const dropped = await dl.drop(cmd.stream, cmd.ids);
      if (cmd.json) print({ dropped });
      else io.out(`Dropped ${dropped} dead letter(s) from "${dlq}".\n`);
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
    return `No dead letters in "${dlq}"${cmd.after ? ` after ${cmd.after}` : ''}.\n`;
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
  text += `\n${page.length} shown, ${total} in "${dlq}".\n`;
  if (more)
    text += `Next page: dlq list ${cmd.stream} --count ${cmd.count} --after ${page[page.length - 1].deadLetterId}\n`;
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
  const indent = ' '.repeat(16);
  let text = '';
  for (const [name, value] of lines)
    text += `${name}:`.padEnd(16) + value.replaceAll('\n', `\n${indent}`) + '\n';
  text += 'fields:\n';
  for (const [name, value] of Object.entries(d.fields)) text += `  ${name} = ${value}\n`;
  if (d.stack) text += `stack:\n${d.stack.replace(/^/gm, '  ')}\n`;
  return text;
}

function replayText(result: ReplayResult, dlq: string): string {
  let text = '';
  for (const r of result.replayed)
    text += `replayed ${r.deadLetterId} -> ${r.stream} ${r.newId} (was ${r.id})\n`;
  for (const id of result.missing) text += `missing  ${id}: not in "${dlq}"\n`;
  for (const r of result.refused) text += `refused  ${r.deadLetterId}: ${r.reason}\n`;
  return (
    text +
    `Replayed ${result.replayed.length}, missing ${result.missing.length}, refused ${result.refused.length}.\n`
  );
}

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]))
      .join('  ')
      .trimEnd() + '\n';
  return line(header) + rows.map(line).join('');
}

function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
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
