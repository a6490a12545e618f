import { ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import { freePort } from '../../../../support/throwaway-redis';

const ROOT = join(__dirname, '..', '..', '..', '..');
const REGISTER = join(ROOT, 'scripts', 'register-ts.js');
const ENTRY = join(ROOT, 'apps', 'demo-shortener', 'src', 'main.ts');

/**
 * The shortener's main.ts in a child process, configured by environment variables only, so
 * that a test can see the process die (an unhandled 'error' event, an uncaught exception)
 * instead of dying with it.
 */
export class AppProcess {
  private readonly output: string[] = [];
  private exit?: { code: number | null; signal: NodeJS.Signals | null };
  private readonly exited: Promise<void>;

  private constructor(
    private readonly child: ChildProcess,
    readonly baseUrl: string,
    readonly port: number,
  ) {
    const keep = (d: Buffer) => {
      this.output.push(d.toString());
      if (this.output.length > 400) this.output.shift();
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exit = { code, signal };
        resolve();
      });
    });
  }

  /** Starts the app on a free loopback port; resolves once `readyPath` answers 200. */
  static async start(
    env: Record<string, string>,
    { readyPath = '/health', timeoutMs = 60_000 } = {},
  ): Promise<AppProcess> {
    const port = await freePort();
    const child = fork(ENTRY, [], {
      cwd: ROOT,
      execArgv: ['-r', REGISTER],
      env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1' },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    const app = new AppProcess(child, `http://127.0.0.1:${port}`, port);
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline && app.alive) {
      try {
        const res = await fetch(`${app.baseUrl}${readyPath}`);
        await res.arrayBuffer();
        if (res.status === 200) return app;
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    const log = app.log();
    await app.stop();
    throw new Error(`the shortener did not answer 200 on ${readyPath}:\n${log}`);
  }

  /** false once the process has exited (for whatever reason). */
  get alive(): boolean {
    return this.exit === undefined;
  }

  /** How the process ended, for assertion messages. */
  get exitInfo(): string {
    return this.exit ? `exit code ${this.exit.code}, signal ${this.exit.signal}` : 'running';
  }

  /** The last lines the process wrote (stdout and stderr). */
  log(): string {
    return this.output.join('');
  }

  /** SIGTERM (then SIGKILL after 10 s); resolves once the process has exited. */
  async stop(): Promise<void> {
    if (!this.alive) return;
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    this.child.kill('SIGTERM');
    await this.exited;
    clearTimeout(timer);
  }
}
