import { ChildProcess, fork } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../../support/throwaway-redis';
import { ticksPerSecond } from '../shared/other-cpu';
import { REGISTER_TS } from '../shared/child';

const ROOT = join(__dirname, '..', '..');
export const SOURCE_ENTRY = join(ROOT, 'apps', 'demo-shortener', 'src', 'main.ts');
/** Where `npm run build` puts the entry. */
export const BUILT_ENTRY = join(ROOT, 'dist', 'apps', 'demo-shortener', 'main.js');
/** Runs an entry under the V8 CPU profiler, driven over IPC (see the file). */
const PROFILED = join(ROOT, 'bench', 'demo-ticks', 'cpu-profiled.js');

export interface StartOptions {
  /** Start dist/.../main.js instead of src/main.ts (the shortener only). */
  built?: boolean;
  /** Another server than the shortener (a .ts file, run through register-ts). */
  entry?: string;
  /** Under cpu-profiled.js, so that startProfile()/writeProfile() work. */
  profiled?: boolean;
  /** More options for node (e.g. --trace-gc). */
  nodeOptions?: string[];
}

/**
 * The shortener (or one of the bare servers it is compared with) in a process of its own, so
 * that the load generator does not share its event loop.
 */
export class ShortenerProcess {
  private constructor(
    private readonly child: ChildProcess,
    readonly baseUrl: string,
    private readonly output: string[],
  ) {}

  /**
   * Starts main.ts (through scripts/register-ts.js), the built main.js, or `options.entry`, with
   * `env`; waits for /health.
   */
  static async start(
    env: Record<string, string>,
    options: StartOptions = {},
  ): Promise<ShortenerProcess> {
    const built = !options.entry && !!options.built;
    if (built && !existsSync(BUILT_ENTRY)) {
      throw new Error(`${BUILT_ENTRY} is missing: run \`npm run build\` first`);
    }
    const entry = options.entry ?? (built ? BUILT_ENTRY : SOURCE_ENTRY);
    const port = await freePort();
    const output: string[] = [];
    const child = fork(options.profiled ? PROFILED : entry, options.profiled ? [entry] : [], {
      execArgv: [...(options.nodeOptions ?? []), ...(built ? [] : ['-r', REGISTER_TS])],
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
    // Starting through register-ts transpiles every file: slow on a loaded machine.
    const deadline = Date.now() + 120_000;
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
    throw new Error(`${entry} did not become healthy:\n${output.join('')}`);
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** CPU time (user + system) the process has used so far, ms; undefined without /proc. */
  cpuTimeMs(): number | undefined {
    try {
      const stat = readFileSync(`/proc/${this.child.pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond();
    } catch {
      return undefined;
    }
  }

  /** Starts the CPU profiler (started with `profiled`). */
  startProfile(): void {
    this.child.send({ cpuProfileStart: true });
  }

  /** Stops the CPU profiler and writes its .cpuprofile to `file`. */
  writeProfile(file: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const onExit = () => reject(new Error('the server exited before writing its CPU profile'));
      const onMessage = (msg: { cpuProfileWritten?: string; cpuProfileError?: string }) => {
        if (!msg.cpuProfileWritten && !msg.cpuProfileError) return;
        this.child.off('message', onMessage);
        this.child.off('exit', onExit);
        if (msg.cpuProfileError) reject(new Error(msg.cpuProfileError));
        else resolve();
      };
      this.child.on('message', onMessage);
      this.child.once('exit', onExit);
      this.child.send({ cpuProfile: file });
    });
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
