/*
 * "Instances" of the app: the parent's own app (one instance) or forked processes, each with its
 * own Nest application context and Redis connections (--instances K). Both run a cliff round
 * (runCliffRound) or a load job (runLoad, hotset and fanout) the same way; the parent
 * synchronizes them and sums.
 */
import { ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { BenchApp, BenchConfig, diffCounters, PatternCounters, PatternName } from './bench-app';
import { LoadJob, LoadResult, runLoad } from './load';

const REGISTER = join(__dirname, '..', '..', 'scripts', 'register-ts.js');
const WORKER = join(__dirname, 'worker.ts');

export interface RoundRequest {
  pattern: PatternName;
  key: string;
  /** Callers in this instance. */
  n: number;
  /** Epoch ms at which every instance fires its callers, all in one tick. */
  startAt: number;
}

export interface RoundResult {
  /** ms per call, from its start to its value. */
  latencies: number[];
  counters: PatternCounters;
}

/** Waits until `startAt`, then starts `n` calls of the same key at once and waits for all. */
export async function runCliffRound(app: BenchApp, req: RoundRequest): Promise<RoundResult> {
  const before = app.counters(req.pattern);
  const delay = req.startAt - Date.now();
  if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
  const call = app.caller(req.pattern);
  const latencies = new Array<number>(req.n);
  const calls: Promise<void>[] = [];
  for (let i = 0; i < req.n; i++) {
    const t0 = performance.now();
    calls.push(call(req.key).then(() => void (latencies[i] = performance.now() - t0)));
  }
  await Promise.all(calls);
  return { latencies, counters: diffCounters(app.counters(req.pattern), before) };
}

export interface Instance {
  round(req: RoundRequest): Promise<RoundResult>;
  load(job: LoadJob): Promise<LoadResult>;
  close(): Promise<void>;
}

export class LocalInstance implements Instance {
  private constructor(private readonly app: BenchApp) {}

  static async start(cfg: BenchConfig): Promise<LocalInstance> {
    return new LocalInstance(await BenchApp.create(cfg));
  }

  round(req: RoundRequest): Promise<RoundResult> {
    return runCliffRound(this.app, req);
  }

  load(job: LoadJob): Promise<LoadResult> {
    return runLoad(this.app, job);
  }

  close(): Promise<void> {
    return this.app.close();
  }
}

type WorkerMessage =
  | { type: 'ready' }
  | { type: 'round'; result: RoundResult }
  | { type: 'load'; result: LoadResult }
  | { type: 'error'; error: string };

export class ForkedInstance implements Instance {
  private pending?: { resolve: (r: never) => void; reject: (e: Error) => void };

  private constructor(private readonly child: ChildProcess) {
    child.on('message', (msg: WorkerMessage) => {
      const p = this.pending;
      this.pending = undefined;
      if (msg.type === 'round' || msg.type === 'load') p?.resolve(msg.result as never);
      else if (msg.type === 'error') p?.reject(new Error(`worker ${child.pid}: ${msg.error}`));
    });
    child.on('exit', (code) =>
      this.pending?.reject(new Error(`worker ${child.pid} exited with ${code}`)),
    );
  }

  static start(cfg: BenchConfig): Promise<ForkedInstance> {
    const child = fork(WORKER, [], {
      execArgv: ['-r', REGISTER],
      env: { ...process.env, BENCH_CONFIG: JSON.stringify(cfg) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) =>
        reject(new Error(`bench worker exited early with ${code}`));
      child.once('error', reject);
      child.once('exit', onExit);
      child.once('message', (msg: WorkerMessage) => {
        child.removeListener('exit', onExit);
        if (msg.type === 'ready') resolve(new ForkedInstance(child));
        else reject(new Error(`bench worker failed to start: ${JSON.stringify(msg)}`));
      });
    });
  }

  round(req: RoundRequest): Promise<RoundResult> {
    return this.request<RoundResult>({ type: 'round', req });
  }

  load(job: LoadJob): Promise<LoadResult> {
    return this.request<LoadResult>({ type: 'load', job });
  }

  private request<R>(msg: object): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.pending = { resolve: resolve as (r: never) => void, reject };
      this.child.send(msg);
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      if (this.child.exitCode !== null || this.child.signalCode !== null) return resolve();
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
      this.child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      this.child.send({ type: 'exit' });
    });
  }
}

/** Starts K instances: the parent's own app for K = 1, else K forked processes. */
export async function startInstances(cfg: BenchConfig, k: number): Promise<Instance[]> {
  if (k <= 1) return [await LocalInstance.start(cfg)];
  const started = await Promise.allSettled(
    Array.from({ length: k }, () => ForkedInstance.start(cfg)),
  );
  const ok = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) {
    await Promise.all(ok.map((i) => i.close()));
    throw failed.reason;
  }
  return ok;
}
