/* The shortener (or a bare server it is compared with) in a process of its own, away from the load generator's event loop. */
import { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { sumMetric } from '../../support/app-process';
import { freePort } from '../../support/throwaway-redis';
import { forkTsProcess, stopProcess } from '../shared/child';

const ROOT = join(__dirname, '..', '..');
const SOURCE_ENTRY = join(ROOT, 'apps', 'demo-shortener', 'src', 'main.ts');
const BUILT_ENTRY = join(ROOT, 'dist', 'apps', 'demo-shortener', 'main.js');

export interface StartOptions {
  /** Start dist/.../main.js instead of src/main.ts (the shortener only). */
  built?: boolean;
  /** Another server than the shortener (a .ts file). */
  entry?: string;
  /** Under cpu-profiled.js, so that startCpuProfile()/writeCpuProfile() work. */
  profiled?: boolean;
  /** More options for node (e.g. --trace-gc). */
  nodeOptions?: string[];
}

export interface ShortenerProcess {
  child: ChildProcess;
  baseUrl: string;
  /**
   * shortener_db_lookups_total (the app's) and stampede_store_errors_total (the cache's store
   * errors, Redis failed or timed out), from /metrics.
   */
  counters(): Promise<{ dbLookups: number; storeErrors: number }>;
  stop(): Promise<void>;
}

/** Starts `options.entry`, the built main.js or src/main.ts with `env`; waits for /health. */
export async function startShortener(
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
  const baseUrl = `http://127.0.0.1:${port}`;
  const app: ShortenerProcess = {
    child,
    baseUrl,
    async counters() {
      const text = await (await fetch(`${baseUrl}/metrics`)).text();
      const dbLookups = sumMetric(text, 'shortener_db_lookups_total', {});
      return { dbLookups, storeErrors: sumMetric(text, 'stampede_store_errors_total', {}) };
    },
    stop: () => stopProcess(child, 'SIGTERM', 10_000),
  };
  for (const deadline = Date.now() + 120_000; Date.now() < deadline && child.exitCode === null;) {
    const res = await fetch(`${baseUrl}/health`).catch(() => undefined); // not listening yet
    if (res?.status === 200) return app;
    await new Promise((r) => setTimeout(r, 100));
  }
  await app.stop();
  throw new Error(`${entry} did not become healthy:\n${output.join('')}`);
}
