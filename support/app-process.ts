/*
 * The demo apps (shortener, ticks, collector) as child processes from their TypeScript sources:
 * shared by the cluster-demo tests and bench:cluster.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const root = join(__dirname, '..');

export type AppName = 'shortener' | 'ticks' | 'collector';

const SOURCES: Record<AppName, string> = {
  shortener: 'apps/demo-shortener/src/main.ts',
  ticks: 'apps/demo-ticks/src/main.ts',
  collector: 'apps/demo-ticks/src/collector.main.ts',
};

/**
 * One app as a child process, from its TypeScript sources (as the demo e2e test does: building
 * here would race the package test's build). Output is kept for failure messages.
 */
export class AppProcess {
  readonly child: ChildProcess;
  output = '';
  readonly exited: Promise<number | null>;

  constructor(
    readonly name: string,
    app: AppName,
    env: Record<string, string>,
    readonly url?: string,
  ) {
    this.child = spawn(
      process.execPath,
      ['-r', join(root, 'scripts', 'register-ts.js'), join(root, SOURCES[app])],
      {
        cwd: root,
        env: { ...process.env, NO_COLOR: '1', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    this.child.stdout!.on('data', (chunk) => (this.output += chunk));
    this.child.stderr!.on('data', (chunk) => (this.output += chunk));
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Resolves once `path` answers 200; fails with the process output if it exits or times out. */
  async ready(path: string, timeoutMs = 150_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (!this.running) throw new Error(`${this.name} exited:\n${this.output.slice(-3000)}`);
      try {
        const res = await fetch(`${this.url}${path}`, { signal: AbortSignal.timeout(2000) });
        if (res.status === 200) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline)
        throw new Error(`${this.name} not ready in ${timeoutMs} ms:\n${this.output.slice(-3000)}`);
      await sleep(250);
    }
  }

  /** The sum of a Prometheus metric's samples whose labels include `labels`. */
  async metric(name: string, labels: Record<string, string> = {}): Promise<number> {
    const text = await (await fetch(`${this.url}/metrics`)).text();
    return sumMetric(text, name, labels);
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM', graceMs = 5000): Promise<void> {
    if (!this.running) return;
    this.child.kill(signal);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/** Sums the samples of `name` (exactly that name) whose labels include `labels`. */
export function sumMetric(text: string, name: string, labels: Record<string, string>): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const have: Record<string, string> = {};
    for (const pair of (m[3] ?? '').matchAll(/(\w+)="([^"]*)"/g)) have[pair[1]] = pair[2];
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) sum += Number(m[4]);
  }
  return sum;
}
