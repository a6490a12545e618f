import { ChildProcess, fork } from 'node:child_process';
import { MAIN_TS, REGISTER_TS } from './helpers';

/** apps/demo-ticks/src/main.ts in a process of its own (the real entry point). */
export class TicksWorker {
  private constructor(
    readonly child: ChildProcess,
    readonly url: string,
  ) {}

  static start(env: Record<string, string>): Promise<TicksWorker> {
    const child = fork(MAIN_TS, [], {
      execArgv: ['-r', REGISTER_TS],
      env: { ...process.env, ...env },
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) =>
        reject(new Error(`demo-ticks exited early (${code})`));
      child.once('error', reject);
      child.once('exit', onExit);
      child.once('message', (msg: { ready?: boolean; url?: string }) => {
        child.off('exit', onExit);
        if (msg.ready && msg.url) resolve(new TicksWorker(child, msg.url));
        else reject(new Error(`unexpected message ${JSON.stringify(msg)}`));
      });
    });
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** SIGKILL: no shutdown hook runs, queued acks are lost. */
  kill(): Promise<void> {
    return this.signal('SIGKILL');
  }

  /** SIGTERM: the app shuts down gracefully (enableShutdownHooks). */
  stop(): Promise<void> {
    return this.signal('SIGTERM');
  }

  private signal(signal: NodeJS.Signals): Promise<void> {
    return new Promise((resolve) => {
      if (!this.alive) return resolve();
      this.child.once('exit', () => resolve());
      this.child.kill(signal);
    });
  }
}
