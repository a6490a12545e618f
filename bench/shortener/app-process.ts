import { ChildProcess, fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const REGISTER = join(ROOT, 'scripts', 'register-ts.js');
export const SOURCE_ENTRY = join(ROOT, 'apps', 'demo-shortener', 'src', 'main.ts');
/** Where `npm run build` puts the entry. */
export const BUILT_ENTRY = join(ROOT, 'dist', 'apps', 'demo-shortener', 'main.js');

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      srv.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

/** The shortener in a process of its own (so the load generator does not share its event loop). */
export class ShortenerProcess {
  private constructor(
    private readonly child: ChildProcess,
    readonly baseUrl: string,
    private readonly output: string[],
  ) {}

  /** Starts main.ts (through scripts/register-ts.js) or the built main.js with `env`; waits for /health. */
  static async start(env: Record<string, string>, built: boolean): Promise<ShortenerProcess> {
    if (built && !existsSync(BUILT_ENTRY)) {
      throw new Error(`${BUILT_ENTRY} is missing: run \`npm run build\` first`);
    }
    const port = await freePort();
    const output: string[] = [];
    const child = fork(built ? BUILT_ENTRY : SOURCE_ENTRY, [], {
      execArgv: built ? [] : ['-r', REGISTER],
      env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1' },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    const keep = (d: Buffer) => {
      output.push(d.toString());
      if (output.length > 200) output.shift();
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    const app = new ShortenerProcess(child, `http://127.0.0.1:${port}`, output);
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      if (child.exitCode !== null) break;
      try {
        const res = await fetch(`${app.baseUrl}/health`);
        if (res.status === 200) return app;
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    await app.stop();
    throw new Error(`the shortener did not become healthy:\n${output.join('')}`);
  }

  /**
   * shortener_db_lookups_total (the app's) and stampede_store_errors_total (the cache's store
   * errors, Redis failed or timed out; recorded by the library through OpenTelemetry), from /metrics.
   */
  async counters(): Promise<{ dbLookups: number; storeErrors: number }> {
    const text = await (await fetch(`${this.baseUrl}/metrics`)).text();
    const sum = (name: string) => {
      let total = 0;
      for (const m of text.matchAll(new RegExp(`^${name}\\{[^}]*\\} (\\d+)$`, 'gm'))) {
        total += Number(m[1]);
      }
      return total;
    };
    return {
      dbLookups: sum('shortener_db_lookups_total'),
      storeErrors: sum('stampede_store_errors_total'),
    };
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      child.kill('SIGTERM');
    });
  }
}
