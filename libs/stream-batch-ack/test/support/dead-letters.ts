import { ChildProcess, execFile, spawn } from 'node:child_process';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { main } from '../../src/dead-letter/dlq-cli';
import { REDIS_URL } from './helpers';

const ROOT = path.join(__dirname, '..', '..', '..', '..');
const DLQ_SCRIPT = path.join(ROOT, 'scripts', 'dlq.js');
let written = 0;

/**
 * Writes a dead letter the way ServerRedisStreams does (every field it writes), into
 * `dlqKey` (default `${stream}:dlq`); returns its id.
 */
export async function addDeadLetter(
  redis: Redis,
  stream: string,
  original: Record<string, string>,
  overrides: Record<string, string> = {},
  dlqKey = `${stream}:dlq`,
): Promise<string> {
  const fields: Record<string, string> = {
    stream,
    id: `${1_700_000_000_000 + ++written}-0`,
    group: 'workers',
    consumer: 'c1',
    deliveries: '3',
    reason: 'handler-failed',
    error: 'boom',
    errorName: 'Error',
    stack: 'Error: boom\n    at handler',
    failedAt: '2024-01-01T00:00:00.000Z',
    fields: JSON.stringify(original),
    ...overrides,
  };
  return (await redis.xadd(dlqKey, '*', ...Object.entries(fields).flat())) as string;
}

export async function addDeadLetters(redis: Redis, stream: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push(await addDeadLetter(redis, stream, { data: `{"n":${i}}` }));
  return ids;
}

export interface DlqRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `node scripts/dlq.js <args>` (the sba-dlq command) to the end. */
export function dlq(args: string[], redisUrl = REDIS_URL): Promise<DlqRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [DLQ_SCRIPT, ...args],
      { cwd: ROOT, env: { ...process.env, REDIS_URL: redisUrl }, timeout: 50_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** Runs the sba-dlq command's `main` in this process (faster than a child; the same output). */
export async function dlqMain(args: string[], redisUrl = REDIS_URL): Promise<DlqRun> {
  const run = { code: -1, stdout: '', stderr: '' };
  run.code = await main(args, {
    out: (text) => (run.stdout += text),
    err: (text) => (run.stderr += text),
    env: { REDIS_URL: redisUrl },
  });
  return run;
}

/** Starts `node scripts/dlq.js <args>`, collecting its output, for a test that signals it. */
export function spawnDlq(
  args: string[],
  redisUrl: string,
): { child: ChildProcess; output: { stdout: string; stderr: string }; exit: Promise<number> } {
  const child = spawn(process.execPath, [DLQ_SCRIPT, ...args], {
    cwd: ROOT,
    env: { ...process.env, REDIS_URL: redisUrl },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = { stdout: '', stderr: '' };
  child.stdout.on('data', (chunk: Buffer) => (output.stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output.stderr += chunk.toString()));
  const exit = new Promise<number>((resolve) =>
    child.once('close', (code, signal) => resolve(code ?? (signal ? -1 : 0))),
  );
  return { child, output, exit };
}
