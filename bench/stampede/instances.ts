/*
 * "Instances" of the app: the parent's own app (one instance) or forked processes, each with its
 * own Nest application context and Redis connections (--instances K). Both run a cliff round
 * or a load job the same way; the parent synchronizes them and sums. A forked instance runs this
 * file: its config comes in BENCH_CONFIG, it answers each command with its result.
 */
import { performance } from 'node:perf_hooks';
import { Child, failToParent, forkTs } from '../shared/child';
import { BenchApp } from './bench-app';
import { BenchConfig, diffCounters, PatternCounters, PatternName } from './patterns';
import { LoadJob, LoadResult, runLoad } from './load';

export interface RoundRequest {
  pattern: PatternName;
  key: string;
  /** Callers in this instance. */
  n: number;
  /** Epoch ms at which every instance fires its callers, all in one tick. */
  startAt: number;
}

/** ms per call, from its start to its value, and the pattern's counters of the round. */
export type RoundResult = { latencies: number[]; counters: PatternCounters };

/** Waits until `startAt`, then starts `n` calls of the same key at once and waits for all. */
export async function runCliffRound(app: BenchApp, req: RoundRequest): Promise<RoundResult> {
  const before = app.counters(req.pattern);
  const delay = req.startAt - Date.now();
  if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
  const call = app.caller(req.pattern);
  const calls = Array.from({ length: req.n }, () => {
    const t0 = performance.now();
    return call(req.key).then(() => performance.now() - t0);
  });
  const latencies = await Promise.all(calls);
  return { latencies, counters: diffCounters(app.counters(req.pattern), before) };
}

export interface Instance {
  round(req: RoundRequest): Promise<RoundResult>;
  load(job: LoadJob): Promise<LoadResult>;
  close(): Promise<void>;
}

function localInstance(app: BenchApp): Instance {
  return {
    round: (req) => runCliffRound(app, req),
    load: (job) => runLoad(app, job),
    close: () => app.close(),
  };
}

type WorkerMessage =
  { type: 'ready' } | { type: 'round'; result: RoundResult } | { type: 'load'; result: LoadResult };
type WorkerCommand =
  { type: 'round'; req: RoundRequest } | { type: 'load'; job: LoadJob } | { type: 'exit' };

/** Generous limits for a busy machine: a worker's start, and one round or load job. */
const START_TIMEOUT_MS = 120_000;
const JOB_TIMEOUT_MS = 600_000;

export class ForkedInstance implements Instance {
  private constructor(private readonly child: Child<WorkerMessage, WorkerCommand>) {}

  static async start(cfg: BenchConfig): Promise<ForkedInstance> {
    const child = forkTs<WorkerMessage, WorkerCommand>('bench worker', __filename, {
      env: { BENCH_CONFIG: JSON.stringify(cfg) },
    });
    try {
      await child.waitFor('ready', START_TIMEOUT_MS);
    } catch (err) {
      await child.kill();
      throw err;
    }
    return new ForkedInstance(child);
  }

  async round(req: RoundRequest): Promise<RoundResult> {
    this.child.send({ type: 'round', req });
    return (await this.child.waitFor('round', JOB_TIMEOUT_MS)).result;
  }

  async load(job: LoadJob): Promise<LoadResult> {
    this.child.send({ type: 'load', job });
    return (await this.child.waitFor('load', JOB_TIMEOUT_MS)).result;
  }

  /** Asks the worker to close its app and exit; SIGKILL after 10 s. */
  async close(): Promise<void> {
    if (!this.child.running) return;
    const timer = setTimeout(() => void this.child.kill(), 10_000);
    this.child.send({ type: 'exit' });
    await this.child.exited;
    clearTimeout(timer);
  }
}

/**
 * Runs `fn` with K instances (the parent's own app for K = 1, else K forked processes), closed
 * when it ends.
 */
export async function withInstances<T>(
  cfg: BenchConfig,
  k: number,
  fn: (instances: Instance[]) => Promise<T>,
): Promise<T> {
  const starting: Promise<Instance>[] =
    k <= 1
      ? [BenchApp.create(cfg).then(localInstance)]
      : Array.from({ length: k }, () => ForkedInstance.start(cfg));
  const started = await Promise.allSettled(starting);
  const instances = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  try {
    if (failed) throw failed.reason;
    return await fn(instances);
  } finally {
    await Promise.all(instances.map((i) => i.close()));
  }
}

async function workerMain(): Promise<void> {
  const app = await BenchApp.create(JSON.parse(process.env.BENCH_CONFIG!) as BenchConfig);
  process.on('message', (msg: WorkerCommand) => {
    if (msg.type === 'exit') return void app.close().then(() => process.disconnect());
    const work =
      msg.type === 'load'
        ? runLoad(app, msg.job).then((result) => ({ type: 'load', result }))
        : runCliffRound(app, msg.req).then((result) => ({ type: 'round', result }));
    work.then(
      (reply) => process.send!(reply),
      (err: unknown) => process.send!({ type: 'error', error: String(err) }),
    );
  });
  process.send!({ type: 'ready' });
}

if (require.main === module) workerMain().catch(failToParent);
