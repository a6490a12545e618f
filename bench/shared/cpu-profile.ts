/*
 * Where the CPU of a V8 CPU profile (.cpuprofile) went: self time per function and per origin
 * (this library, Nest, ioredis, Node's internals, GC...), and the inclusive time of the library's
 * functions. Lines of .ts files are mapped back to the TypeScript source.
 *
 *   node -r ./scripts/register-ts.js bench/shared/cpu-profile.ts <file.cpuprofile> [--top 15]
 */
import { existsSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as ts from 'typescript';

type CallFrame = { functionName: string; url: string; lineNumber: number; columnNumber: number };
type ProfileNode = { id: number; callFrame: CallFrame; children?: number[] };
type CpuProfile = {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
};
type Time = { name: string; where: string; origin: string; us: number };
type FunctionTime = { name: string; where: string; origin: string; pct: number; ms: number };
export type ProfileSummary = ReturnType<typeof summarizeProfile>;

const ROOT = join(__dirname, '..', '..');
const sourceMaps = new Map<string, SourceMap | null>();

/** The source map of a .ts file as scripts/register-ts.js transpiles it (same compiler options). */
function sourceMapOf(path: string): SourceMap | null {
  if (!sourceMaps.has(path)) {
    let map: SourceMap | null = null;
    try {
      const { config } = ts.readConfigFile(join(ROOT, 'tsconfig.json'), ts.sys.readFile);
      const { options } = ts.convertCompilerOptionsFromJson(config.compilerOptions, ROOT);
      const out = ts.transpileModule(readFileSync(path, 'utf8'), {
        compilerOptions: {
          ...options,
          sourceMap: true,
          inlineSourceMap: false,
          declaration: false,
        },
        fileName: path,
      });
      if (out.sourceMapText) map = new SourceMap(JSON.parse(out.sourceMapText));
    } catch {
      map = null;
    }
    sourceMaps.set(path, map);
  }
  return sourceMaps.get(path)!;
}

/** 1-based source line of a frame (the TypeScript line for a .ts file). */
function sourceLine(frame: CallFrame): number {
  if (frame.url.startsWith('file://') && frame.url.endsWith('.ts')) {
    const path = fileURLToPath(frame.url);
    const map = existsSync(path) ? sourceMapOf(path) : null;
    const entry = map?.findEntry(frame.lineNumber, frame.columnNumber) as
      { originalLine?: number } | undefined;
    if (entry && typeof entry.originalLine === 'number') return entry.originalLine + 1;
  }
  return frame.lineNumber + 1;
}

const NATIVE: Record<string, string> = {
  '(garbage collector)': 'GC',
  '(program)': 'V8/native (program)',
  '(idle)': 'idle',
};

/** Where a function comes from, by its script's URL. */
function originOf({ url, functionName }: CallFrame): string {
  if (!url) return NATIVE[functionName] ?? 'V8/native';
  if (url.includes('libs/stream-batch-ack/')) return 'stream-batch-ack';
  if (url.includes('libs/stampede/')) return 'stampede';
  if (url.includes('/bench/')) return 'bench (recorder, handler)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1];
  if (url.includes('/apps/')) return /\/apps\/([^/]+)/.exec(url)![1];
  if (url.startsWith('node:')) return 'node internals';
  return 'other';
}

/** A function's name and place, and the key it is summed under. */
function describe(frame: CallFrame) {
  const m = /(?:libs|bench|node_modules)\/.*$/.exec(frame.url) ?? /[^/]+$/.exec(frame.url);
  const where = frame.url ? `${m ? m[0] : frame.url}:${sourceLine(frame)}` : '';
  const name = frame.functionName || '(anonymous)';
  return { name, where, key: `${name}@${where}` };
}

export function summarizeProfile(file: string, top = 15) {
  const { nodes, samples, timeDeltas, startTime, endTime } = JSON.parse(
    readFileSync(file, 'utf8'),
  ) as CpuProfile;
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  for (let i = 0; i < samples.length; i++) {
    // timeDeltas[i] is the time before sample i; the sample stands for the time after it.
    const dt = i + 1 < timeDeltas.length ? timeDeltas[i + 1] : 0;
    selfUs.set(samples[i], (selfUs.get(samples[i]) ?? 0) + Math.max(0, dt));
  }
  const add = (times: Map<string, Time>, frame: CallFrame, origin: string, us: number) => {
    const { name, where, key } = describe(frame);
    const t = times.get(key) ?? { name, where, origin, us: 0 };
    t.us += us;
    times.set(key, t);
  };
  const fns = new Map<string, Time>();
  const origins = new Map<string, number>();
  // Inclusive time of the library's functions: each sample counts once for every such function
  // on its stack.
  const totals = new Map<string, Time>();
  const parent = new Map<number, number>();
  for (const n of nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  let busy = 0;
  for (const [id, us] of selfUs) {
    const node = byId.get(id);
    const origin = node && originOf(node.callFrame);
    if (!node || us === 0 || origin === 'idle') continue;
    busy += us;
    origins.set(origin!, (origins.get(origin!) ?? 0) + us);
    add(fns, node.callFrame, origin!, us);
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const frame = byId.get(cur)!.callFrame;
      const { key } = describe(frame);
      if (originOf(frame) !== 'stream-batch-ack' || seen.has(key)) continue;
      seen.add(key);
      add(totals, frame, 'stream-batch-ack', us);
    }
  }
  const pct = (us: number) => (busy === 0 ? 0 : (us / busy) * 100);
  const largest = (xs: Map<string, Time>): FunctionTime[] =>
    [...xs.values()]
      .sort((a, b) => b.us - a.us)
      .slice(0, top)
      .map(({ us, ...f }) => ({ ...f, pct: pct(us), ms: us / 1000 }));
  return {
    file,
    wallMs: (endTime - startTime) / 1000,
    busyMs: busy / 1000,
    origins: [...origins]
      .map(([origin, us]) => ({ origin, pct: pct(us) }))
      .sort((a, b) => b.pct - a.pct),
    functions: largest(fns),
    libraryTotals: largest(totals),
  };
}

export function formatProfileSummary(s: ProfileSummary): string {
  const line = (f: FunctionTime) =>
    `    ${f.pct.toFixed(1).padStart(5)} %  ${f.name}  ${f.where ? `(${f.where})` : `[${f.origin}]`}`;
  const origins = s.origins.filter((o) => o.pct >= 0.5);
  return [
    `${basename(s.file)}: ${s.wallMs.toFixed(0)} ms profiled, ${s.busyMs.toFixed(0)} ms on CPU (${((s.busyMs / Math.max(1e-9, s.wallMs)) * 100).toFixed(0)} %)`,
    `  self time by origin: ${origins.map((o) => `${o.origin} ${o.pct.toFixed(1)} %`).join(', ')}`,
    '  self time by function (% of CPU time):',
    ...s.functions.map(line),
    ...(s.libraryTotals.length > 0
      ? ['  total time (self + callees) of stream-batch-ack functions (% of CPU time):']
      : []),
    ...s.libraryTotals.map(line),
  ].join('\n');
}

if (require.main === module) {
  const args = process.argv.slice(2);
  const i = args.indexOf('--top');
  const top = i >= 0 ? Number(args.splice(i, 2)[1]) : 15;
  if (args.length === 0) {
    process.stderr.write('usage: cpu-profile.ts <file.cpuprofile>... [--top 15]\n');
    process.exit(2);
  }
  for (const file of args)
    process.stdout.write(`${formatProfileSummary(summarizeProfile(file, top))}\n\n`);
}
