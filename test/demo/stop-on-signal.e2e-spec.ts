import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { REDIS_URL } from '../support/redis';
import { freePort } from '../../support/throwaway-redis';
import { waitFor } from '../support/wait';

const root = join(__dirname, '..', '..');
const WITH_REDIS = join(root, 'scripts', 'with-redis.js');
/** Starts one long-running child, prints `pids <own> <child's>`, stops it on SIGINT/SIGTERM. */
const FIXTURE = join(__dirname, 'fixtures', 'long-running-child.js');
/** The apps of `npm run demo -- --from-source`, as their command lines name them. */
const DEMO_APPS = [
  'apps/demo-shortener/src/main.ts',
  'apps/demo-ticks/src/main.ts',
  'apps/demo-ticks/src/collector.main.ts',
];

interface Proc {
  pid: number;
  ppid: number;
  args: string;
}

/** The processes running now (an exited one that is not reaped yet, a zombie, is left out). */
function processes(): Proc[] {
  const table = execFileSync('ps', ['-A', '-o', 'pid=,ppid=,stat=,args='], { encoding: 'utf8' });
  return table
    .split('\n')
    .map((line) => /^\s*(\d+)\s+(\d+)\s+(\S+)\s+(.*)$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null && !m[3].startsWith('Z'))
    .map((m) => ({ pid: Number(m[1]), ppid: Number(m[2]), args: m[4] }));
}

/** `pid` and every process below it. */
function tree(pid: number): Proc[] {
  const all = processes();
  const found = all.filter((p) => p.pid === pid);
  for (let i = 0; i < found.length; i++) found.push(...all.filter((p) => p.ppid === found[i].pid));
  return found;
}

const describeProcs = (procs: Proc[]) =>
  procs.map((p) => `${p.pid} (parent ${p.ppid}) ${p.args}`).join('\n  ');

/*
 * A process manager (systemd, supervisord, pm2, a container runtime) starts one process and, to
 * stop it, sends SIGTERM (or SIGINT) to that process alone, not to its process group as Ctrl-C
 * in a terminal does. Each chain below is started that way and signalled at its top: every
 * process below it must be gone within a few seconds.
 */
describe('the demo launchers stop every process below them on a signal to the top one', () => {
  jest.setTimeout(120_000);
  /** Every process seen below a chain started here: killed at the end if one is left. */
  const seen = new Set<number>();
  const started: ChildProcess[] = [];
  let redis: Redis;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });

  afterEach(() => {
    for (const p of processes()) if (seen.has(p.pid)) process.kill(p.pid, 'SIGKILL');
    for (const child of started) if (child.exitCode === null) child.kill('SIGKILL');
    seen.clear();
    started.length = 0;
  });

  afterAll(async () => {
    await redis.quit();
  });

  /** Starts `command`, its output collected in `output()`. */
  function start(command: string, args: string[], env: Record<string, string> = {}) {
    const child = spawn(command, args, {
      cwd: root,
      env: { ...process.env, REDIS_URL, NO_COLOR: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    started.push(child);
    let output = '';
    child.stdout!.on('data', (chunk) => (output += chunk));
    child.stderr!.on('data', (chunk) => (output += chunk));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on('exit', (code, signal) => resolve({ code, signal })),
    );
    return { pid: child.pid!, output: () => output, exited };
  }

  /** The processes below `pid` once `complete` holds for them (polled, generously). */
  async function treeOnce(pid: number, what: string, complete: (procs: Proc[]) => boolean) {
    let procs: Proc[] = [];
    await waitFor(
      what,
      () => {
        procs = tree(pid);
        for (const p of procs) seen.add(p.pid);
        return complete(procs);
      },
      60_000,
      100,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; running:\n  ${describeProcs(procs)}`);
    });
    return procs;
  }

  /** Waits until none of `procs` runs any more; fails naming the ones left after `ms`. */
  async function allGone(procs: Proc[], ms: number) {
    const pids = new Set(procs.map((p) => p.pid));
    const left = () => processes().filter((p) => pids.has(p.pid));
    await waitFor(`${procs.length} processes gone`, () => left().length === 0, ms, 100).catch(
      (err: Error) => {
        throw new Error(`${err.message}; still running:\n  ${describeProcs(left())}`);
      },
    );
  }

  it('node scripts/with-redis.js <command>: SIGTERM to it is passed on, and it exits after the command', async () => {
    const chain = start(process.execPath, [WITH_REDIS, process.execPath, FIXTURE]);
    await waitFor('the pids line', () => /^pids \d+ \d+$/m.test(chain.output()), 60_000, 50);
    const [, launcher, child] = /^pids (\d+) (\d+)$/m.exec(chain.output())!.map(Number);
    const procs = await treeOnce(chain.pid, 'the command and its child', (t) =>
      [launcher, child].every((pid) => t.some((p) => p.pid === pid)),
    );
    expect(procs).toHaveLength(3);

    process.kill(chain.pid, 'SIGTERM');
    await allGone(procs, 10_000);
    expect(await chain.exited).toEqual({ code: 0, signal: null });
  });

  it('a shell around it (`sh -c`, as npm runs a script) killed by SIGTERM: with-redis stops the command all the same', async () => {
    // The shell dies of the SIGTERM without passing it on: with-redis loses its parent, and must
    // not keep the command running.
    const script = `node '${WITH_REDIS}' node '${FIXTURE}'`;
    const chain = start('sh', ['-c', script]);
    await waitFor('the pids line', () => /^pids \d+ \d+$/m.test(chain.output()), 60_000, 50);
    const [, launcher, child] = /^pids (\d+) (\d+)$/m.exec(chain.output())!.map(Number);
    const procs = await treeOnce(chain.pid, 'the command and its child', (t) =>
      [launcher, child].every((pid) => t.some((p) => p.pid === pid)),
    );

    process.kill(chain.pid, 'SIGTERM');
    await allGone(procs, 10_000);
    await chain.exited;
    // Written by with-redis after the shell died: read from the pipe a moment later, on a busy machine.
    await waitFor('the launcher saying why it stopped', () =>
      chain.output().includes('[with-redis] the parent process is gone: stopping'),
    );
  });

  /** `npm run demo -- --from-source` on free ports, a small collector. */
  async function demoEnv() {
    return {
      SHORTENER_PORT: String(await freePort()),
      TICKS_PORT: String(await freePort()),
      COLLECTOR_SYMBOLS: '2',
      COLLECTOR_RATE: '5',
      LOG_LEVEL: 'warn',
      npm_config_update_notifier: 'false',
    };
  }

  const hasApps = (procs: Proc[]) =>
    DEMO_APPS.every((app) => procs.some((p) => p.args.includes(app)));

  /**
   * The run's key prefix and temporary directory are gone, as the demo's last line says (the
   * output comes through a pipe that outlives the killed parent: it may arrive a little later).
   */
  async function cleanedUp(output: () => string) {
    const removedLine = /removed \d+ Redis keys of \S+ and (\S+)/;
    await waitFor('the line of the removed keys', () => removedLine.test(output()), 10_000, 50);
    const prefix = /key prefix (demo:[0-9a-f]+:)/.exec(output())?.[1];
    expect(prefix).toBeDefined();
    const removed = removedLine.exec(output());
    expect(existsSync(removed![1])).toBe(false);
    expect(await redis.keys(`${prefix}*`)).toEqual([]);
  }

  it.each(['SIGTERM', 'SIGINT'] as const)(
    'npm run demo: %s to the npm process alone stops npm, with-redis, demo.js and the three apps',
    async (signal) => {
      const chain = start('npm', ['run', 'demo', '--', '--from-source'], await demoEnv());
      const procs = await treeOnce(chain.pid, 'the three apps started', hasApps);
      // npm, with-redis, demo.js and the three apps (and a shell, were it not exec'ed).
      expect(procs.length).toBeGreaterThanOrEqual(6);

      process.kill(chain.pid, signal);
      // demo.js gives the apps 4 s to close before it kills them, then deletes its keys.
      await allGone(procs, 20_000);
      // Stopped by the signal (0), not by an app that failed (1), and npm exited with it.
      expect(await chain.exited).toEqual({ code: 0, signal: null });
      await cleanedUp(chain.output);
    },
  );

  it("node scripts/demo.js: its parent's death stops it and the three apps", async () => {
    // A parent that starts demo.js and is then killed outright (SIGKILL: it cannot pass anything on).
    const parent = start(
      process.execPath,
      [
        '-e',
        "require('node:child_process').spawn(process.execPath, process.argv.slice(1), { stdio: 'inherit' }); setInterval(() => {}, 60_000);",
        join(root, 'scripts', 'demo.js'),
        '--from-source',
      ],
      await demoEnv(),
    );
    const procs = await treeOnce(parent.pid, 'the three apps started', hasApps);
    expect(procs.length).toBeGreaterThanOrEqual(5); // the parent, demo.js and the three apps

    process.kill(parent.pid, 'SIGKILL');
    await allGone(procs, 20_000);
    await cleanedUp(parent.output);
    await waitFor('demo.js saying why it stopped', () =>
      parent.output().includes('[demo] the parent process is gone: stopping'),
    );
  });
});
