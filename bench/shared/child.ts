/*
 * Forked worker processes over IPC: the parent waits for typed messages (`ready`, results), and
 * a child that reports `{ type: 'error' }` or exits non-zero fails every wait at once instead of
 * leaving it to time out.
 */
import { ChildProcess, fork, StdioOptions } from 'node:child_process';
import { join } from 'node:path';

export const REGISTER_TS = join(__dirname, '..', '..', 'scripts', 'register-ts.js');
/** Runs an entry under the V8 CPU profiler, driven over IPC (see the file). */
const CPU_PROFILED = join(__dirname, 'cpu-profiled.js');

export interface Message {
  type: string;
}
type ErrorMessage = { type: 'error'; error: string };

export class Child<In extends Message, Out extends Message = Message> {
  private readonly waiters: { type: string; resolve: (m: In) => void }[] = [];
  /** Messages that arrived while nobody waited for their type. */
  private readonly unclaimed: In[] = [];
  private failure: Error | null = null;
  private readonly failed = new Set<(err: Error) => void>();
  readonly exited: Promise<void>;

  constructor(
    readonly name: string,
    readonly proc: ChildProcess,
  ) {
    proc.on('message', (msg: In | ErrorMessage) => {
      if (msg.type === 'error')
        return this.fail(new Error(`${name}: ${(msg as ErrorMessage).error}`));
      const i = this.waiters.findIndex((w) => w.type === msg.type);
      if (i >= 0) this.waiters.splice(i, 1)[0].resolve(msg as In);
      else this.unclaimed.push(msg as In);
    });
    this.exited = new Promise((res) =>
      proc.once('exit', (code, signal) => {
        if (code !== 0 && !signal) this.fail(new Error(`${name} exited with code ${code}`));
        res();
      }),
    );
  }

  get running(): boolean {
    return isRunning(this.proc);
  }

  private fail(err: Error): void {
    this.failure ??= err;
    for (const reject of this.failed) reject(err);
  }

  /** The next message of `type`; rejects on the child's error, its exit, or the timeout. */
  waitFor<T extends In['type']>(type: T, timeoutMs: number): Promise<Extract<In, { type: T }>> {
    type R = Extract<In, { type: T }>;
    const early = this.unclaimed.findIndex((m) => m.type === type);
    if (early >= 0) return Promise.resolve(this.unclaimed.splice(early, 1)[0] as R);
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<R>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.failed.delete(onFail);
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
      };
      const onFail = (err: Error) => (done(), reject(err));
      const timer = setTimeout(
        () => onFail(new Error(`${this.name}: no "${type}" within ${timeoutMs} ms`)),
        timeoutMs,
      );
      const waiter = { type, resolve: (m: In) => (done(), resolve(m as R)) };
      this.failed.add(onFail);
      this.waiters.push(waiter);
    });
  }

  send(msg: Out): void {
    if (this.proc.connected) this.proc.send(msg);
  }

  /** SIGKILL (unless it already ended), then waits for the exit. */
  async kill(): Promise<void> {
    if (this.running) this.proc.kill('SIGKILL');
    await this.exited;
  }
}

export interface ForkOptions {
  /** Added to this process' environment. */
  env?: Record<string, string>;
  /** More node options (e.g. --max-old-space-size). */
  execArgv?: string[];
  stdio?: StdioOptions;
  /** Under cpu-profiled.js, so that startCpuProfile()/writeCpuProfile() work. */
  profiled?: boolean;
}

/** Forks `file` (.ts files with the TypeScript loader) with an IPC channel. */
export function forkTsProcess(file: string, options: ForkOptions = {}): ChildProcess {
  const ts = file.endsWith('.ts') ? ['-r', REGISTER_TS] : [];
  return fork(options.profiled ? CPU_PROFILED : file, options.profiled ? [file] : [], {
    execArgv: [...(options.execArgv ?? []), ...ts],
    env: { ...process.env, ...options.env },
    stdio: options.stdio ?? ['ignore', 'inherit', 'inherit', 'ipc'],
  });
}

/** forkTsProcess, wrapped in a Child that waits for its messages by type. */
export function forkTs<In extends Message, Out extends Message = Message>(
  name: string,
  file: string,
  options: ForkOptions = {},
): Child<In, Out> {
  return new Child<In, Out>(name, forkTsProcess(file, options));
}

export const isRunning = (p: ChildProcess) => p.exitCode === null && p.signalCode === null;

/** Sends `signal` (SIGKILL after `graceMs`) and waits for the exit. */
export async function stopProcess(
  p: ChildProcess,
  signal: NodeJS.Signals = 'SIGTERM',
  graceMs = 15_000,
): Promise<void> {
  if (!isRunning(p)) return;
  const exited = new Promise((resolve) => p.once('exit', resolve));
  const timer = setTimeout(() => p.kill('SIGKILL'), graceMs);
  p.kill(signal);
  await exited;
  clearTimeout(timer);
}

/** The next IPC message of `p` that `accept` takes; rejects when `p` exits first. */
export function nextMessage<T>(
  p: ChildProcess,
  what: string,
  accept = (_m: T) => true,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => {
      p.off('message', onMessage);
      reject(new Error(`${what} exited (${code}) before answering`));
    };
    const onMessage = (msg: T) => {
      if (!accept(msg)) return;
      p.off('message', onMessage);
      p.off('exit', onExit);
      resolve(msg);
    };
    p.on('message', onMessage);
    p.once('exit', onExit);
  });
}

/** A process forked with `profiled`: starts the V8 CPU profiler. */
export const startCpuProfile = (p: ChildProcess) => p.send({ cpuProfileStart: true });

/** A process forked with `profiled`: stops the CPU profiler and writes the profile to `file`. */
export async function writeCpuProfile(p: ChildProcess, file: string): Promise<void> {
  type Reply = { cpuProfileWritten?: string; cpuProfileError?: string };
  const reply = nextMessage<Reply>(
    p,
    'the profiled process',
    (m) => !!m.cpuProfileWritten || !!m.cpuProfileError,
  );
  p.send({ cpuProfile: file });
  const { cpuProfileError } = await reply;
  if (cpuProfileError) throw new Error(cpuProfileError);
}

/** In a forked worker: sends a message to the parent (no-op when run on its own). */
export function toParent(msg: Message): void {
  process.send?.(msg);
}

/** In a forked worker: reports `err` to the parent as `{ type: 'error' }` and exits 1. */
export function failToParent(err: unknown): void {
  const error = err instanceof Error ? (err.stack ?? err.message) : String(err);
  if (process.send) process.send({ type: 'error', error }, () => process.exit(1));
  else {
    process.stderr.write(`${error}\n`);
    process.exit(1);
  }
}
