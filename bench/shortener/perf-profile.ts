/*
 * On-CPU profiles of a server process with Linux `perf` (cpu-clock, call graphs): each sample
 * goes to the origin of the closest JavaScript frame on its stack (so V8's builtins and runtime
 * count for the code that called them), to the kernel, or to GC. Unlike V8's own sampler, perf
 * samples only while the process runs on a core. Needs `perf`, root or
 * kernel.perf_event_paranoid <= 1, and the process started with perfNodeOptions() (V8 writes its
 * JIT code with timestamps for `perf inject --jit`; the perf-<pid>.map of --perf-basic-prof names
 * a function by whatever ran there before once V8 reuses the space).
 */
import { spawn, spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';

/** Node options that let perf name JavaScript functions; V8 writes its jit-<pid>.dump in `dir`. */
export function perfNodeOptions(dir: string): string[] {
  return ['--perf-prof', `--perf-prof-path=${dir}`, '--interpreted-frames-native-stack'];
}

/** Whether `perf` is installed and may profile here; the reason when it may not. */
export function perfUnavailable(): string | undefined {
  const r = spawnSync('perf', ['--version'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) return 'perf is not installed';
  if (process.getuid?.() !== 0) {
    const level = spawnSync('cat', ['/proc/sys/kernel/perf_event_paranoid'], { encoding: 'utf8' });
    if (Number(level.stdout) > 1) return 'kernel.perf_event_paranoid > 1 and not root';
  }
  return undefined;
}

/**
 * Starts `perf record` on `pid`, writing `file`; resolves once perf is attached. stop() ends it
 * and merges V8's JIT code into `file` (perf inject --jit).
 */
export async function recordPerf(pid: number, file: string): Promise<{ stop(): Promise<void> }> {
  const raw = `${file}.raw`;
  const child = spawn(
    'perf',
    ['record', '-k', '1', '-e', 'cpu-clock', '-F', '997', '-g', '-p', String(pid), '-o', raw],
    { stdio: 'ignore' },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // perf prints nothing when attached: give it a moment (samples before then are only lost).
  await new Promise((resolve) => setTimeout(resolve, 300));
  return {
    stop: async () => {
      child.kill('SIGINT');
      await exited;
      const r = spawnSync('perf', ['inject', '--jit', '-i', raw, '-o', file], { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`perf inject failed: ${r.stderr}`);
      rmSync(raw, { force: true });
    },
  };
}

const GC = /(Heap::|Scavenger|MarkCompact|ConcurrentMarking|Sweeper|MinorMS|GCTracer)/;

/** The origin of a JavaScript frame's symbol (`JS:*name /path/file.js:line:col`). */
function originOfJsFrame(symbol: string): string {
  const where = symbol.replace(/^JS:[*~^+']*\S*\s*/, '');
  if (where.startsWith('node:')) return 'node (http, net, streams)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(where);
  if (pkg) return pkg[1];
  if (where.includes('libs/stampede/')) return 'stampede';
  const app = /\/apps\/([^/]+)\//.exec(where);
  if (app) return app[1];
  if (where.includes('/bench/')) return 'bench server';
  return 'other JavaScript';
}

/** Share of the samples of a perf.data file by origin (0..1), largest first. */
export function perfShares(file: string): { origin: string; share: number }[] {
  const r = spawnSync('perf', ['script', '-i', file, '-F', 'ip,sym,dso'], {
    encoding: 'utf8',
    maxBuffer: 1 << 30,
  });
  if (r.status !== 0) throw new Error(`perf script failed: ${r.stderr}`);
  const counts = new Map<string, number>();
  let total = 0;
  const count = (frames: string[]) => {
    if (frames.length === 0) return;
    total++;
    const origin = originOfSample(frames);
    counts.set(origin, (counts.get(origin) ?? 0) + 1);
  };
  let frames: string[] = [];
  for (const line of r.stdout.split('\n')) {
    if (/^\s*$/.test(line)) {
      count(frames);
      frames = [];
    } else if (/^\t\s*[0-9a-f]+ /.test(line)) {
      frames.push(line.trim().replace(/^[0-9a-f]+ /, ''));
    }
  }
  count(frames);
  return [...counts]
    .map(([origin, n]) => ({ origin, share: n / Math.max(1, total) }))
    .sort((a, b) => b.share - a.share);
}

function originOfSample(frames: string[]): string {
  if (frames[0].includes('[kernel.kallsyms]')) return 'kernel (syscalls, TCP, scheduler)';
  for (const frame of frames) {
    if (GC.test(frame)) return 'GC';
    if (frame.startsWith('JS:') && !frame.startsWith('JS:<')) return originOfJsFrame(frame);
    if (frame.startsWith('llhttp')) return 'node (http, net, streams)';
  }
  if (frames.some((f) => /^uv_|^uv__|epoll/.test(f))) return 'event loop (libuv)';
  return 'V8/node native';
}
