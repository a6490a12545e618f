import { ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';

const REGISTER = join(__dirname, '..', '..', '..', '..', 'scripts', 'register-ts.js');
const WORKER = join(__dirname, 'instance-worker.ts');

export interface CallResult {
  values?: string[];
  ms?: number;
  error?: string;
}

/** A forked worker process running its own Nest app context (see instance-worker.ts). */
export class Instance {
  private nextId = 1;
  private readonly pending = new Map<number, (r: CallResult) => void>();

  private constructor(readonly child: ChildProcess) {
    child.on('message', (msg: { id?: number } & CallResult) => {
      if (msg.id !== undefined) {
        this.pending.get(msg.id)?.(msg);
        this.pending.delete(msg.id);
      }
    });
  }

  static start(env: Record<string, string>): Promise<Instance> {
    const child = fork(WORKER, [], {
      execArgv: ['-r', REGISTER],
      env: { ...process.env, ...env },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    return new Promise((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`worker exited early with ${code}`)));
      child.once('message', () => {
        child.removeAllListeners('exit');
        resolve(new Instance(child));
      });
    });
  }

  call(
    method: 'locked' | 'unlocked',
    key: string,
    concurrency: number,
    loaderMs: number,
  ): Promise<CallResult> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      this.child.send({ id, method, key, concurrency, loaderMs });
    });
  }

  kill(): Promise<void> {
    return new Promise((resolve) => {
      if (this.child.exitCode !== null || this.child.signalCode !== null) return resolve();
      this.child.once('exit', () => resolve());
      this.child.kill('SIGKILL');
    });
  }

  stop(): Promise<void> {
    return new Promise((resolve) => {
      if (this.child.exitCode !== null || this.child.signalCode !== null) return resolve();
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
      this.child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      this.child.send('exit');
    });
  }
}
