import { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../../support/throwaway-redis';
import { forkTsProcess, startCpuProfile, stopProcess, writeCpuProfile } from '../shared/child';
import { processCpuMs } from '../shared/other-cpu';

const ROOT = join(__dirname, '..', '..');
const SOURCE_ENTRY = join(ROOT, 'apps', 'demo-shortener', 'src', 'main.ts');
/** Where `npm run build` puts the entry. */
const BUILT_ENTRY = join(ROOT, 'dist', 'apps', 'demo-shortener', 'main.js');

export interface StartOptions {
  /** Start dist/.../main.js instead of src/main.ts (the shortener only). */
  built?: boolean;
  /** Another server than the shortener (a .ts file). */
  entry?: string;
  /** Under cpu-profiled.js, so that startProfile()/writeProfile() work. */
  profiled?: boolean;
  /** More options for node (e.g. --trace-gc). */
  nodeOptions?: string[];
}

/** The shortener (or a bare server it is compared with) in a process of its own, away from the load generator's event loop. */
export class ShortenerProcess {
  private constructor(
    private readonly child: ChildProcess,
    readonly baseUrl: string,
  ) {}

  /** Starts `options.entry`, the built main.js or src/main.ts with `env`; waits for /health. */
  static async start(
    env: Record<string, string>,
    options: StartOptions = {},
  ): Promise<ShortenerProcess> {
    const built = !options.entry && !!options.built;
    if (built && !existsSync(BUILT_ENTRY))
      throw new Error(`${BUILT_ENTRY} is missing: run \`npm run build\` first`);
    const entry = options.entry ?? (built ? BUILT_ENTRY : SOURCE_ENTRY);
    const port = await freePort();
    const child = forkTsProcess(entry, {
      env: { ...env, PORT: String(port), HOST: '127.0.0.1' },
      ...{ execArgv: options.nodeOptions, profiled: options.profiled },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    const output: string[] = [];
    const keep = (d: Buffer) => output.push(d.toString()) > 200 && output.shift();
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    const app = new ShortenerProcess(child, `http://127.0.0.1:${port}`);
    for (const deadline = Date.now() + 120_000; Date.now() < deadline && child.exitCode === null;) {
      const res = await fetch(`${app.baseUrl}/health`).catch(() => undefined); // not listening yet
      if (res?.status === 200) return app;
      await new Promise((r) => setTimeout(r, 100));
    }
    await app.stop();
    throw new Error(`${entry} did not become healthy:\n${output.join('')}`);
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** CPU time (user + system) the process has used so far, ms; undefined without /proc. */
  cpuTimeMs(): number | undefined {
    return processCpuMs(this.child.pid!);
  }

  startProfile(): void {
    startCpuProfile(this.child);
  }

  writeProfile(file: string): Promise<void> {
    return writeCpuProfile(this.child, file);
  }

  /**
   * shortener_db_lookups_total (the app's) and stampede_store_errors_total (the cache's store
   * errors, Redis failed or timed out), from /metrics.
   */
  async counters(): Promise<{ dbLookups: number; storeErrors: number }> {
    const text = await (await fetch(`${this.baseUrl}/metrics`)).text();
    const sum = (name: string) =>
      [...text.matchAll(new RegExp(`^${name}\\{[^}]*\\} (\\d+)$`, 'gm'))].reduce(
        (a, m) => a + Number(m[1]),
        0,
      );
    return {
      dbLookups: sum('shortener_db_lookups_total'),
      storeErrors: sum('stampede_store_errors_total'),
    };
  }

  stop(): Promise<void> {
    return stopProcess(this.child, 'SIGTERM', 10_000);
  }
}
