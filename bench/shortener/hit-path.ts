/*
 * The hit path: the shortener's cached redirect against the same 302 from a bare Fastify route
 * (the framework floor) and from a bare Nest + Fastify route (Nest's own ceiling), measured in
 * one run by the same load generator with the same connections. The servers run side by side;
 * the rows are interleaved in rounds (each round starting one server further on), so that a
 * change in the machine's load reaches them all, and each row's ratio to the reference is taken
 * within a round.
 */
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { startCpuProfile, writeCpuProfile } from '../shared/child';
import { summarizeProfile } from '../shared/cpu-profile';
import { LoadResult, runLoad } from '../shared/load';
import { processCpuMs } from '../shared/other-cpu';
import { median, renderTable } from '../shared/table';
import type { ShortenerProcess, StartOptions } from './app-process';
import { perfNodeOptions, perfShares, recordPerf } from './perf-profile';

export interface HitPathServer {
  name: string;
  start(options: Pick<StartOptions, 'profiled' | 'nodeOptions'>): Promise<ShortenerProcess>;
  /** Started before the others (the shortener, which creates the codes the others answer). */
  startFirst?: boolean;
}

/**
 * `profile`: profile each server over one more run (not one of the rounds) into `dir`, with V8's
 * sampler (.cpuprofile) or Linux perf (on-CPU samples only: see perf-profile.ts).
 */
export type HitPathOptions = Record<'connections' | 'durationS' | 'warmupS' | 'rounds', number> & {
  profile?: { dir: string; with: 'v8' | 'perf' };
  log: (line: string) => void;
};

/** `cpuUs`: CPU time of the server per response, µs (from /proc; undefined elsewhere). */
type HitPathRun = LoadResult & { loadAvg: number; cpuUs?: number };

/**
 * rps, cpuUs: medians over the rounds; ratio: median of rps / the reference's in the same round;
 * cpu: CPU per request of the profiled run, all of it and by origin (largest first), µs.
 */
type HitPathRow = {
  name: string;
  runs: HitPathRun[];
  rps: number;
  cpuUs?: number;
  ratio: number;
  cpu?: {
    file: string;
    profiler: 'v8' | 'perf';
    totalUs: number;
    origins: { origin: string; us: number }[];
  };
};

export type HitPathReport = Awaited<ReturnType<typeof runHitPath>>;

/** Starts `servers`, warms each, then runs `rounds` rounds of one load run per server. */
export async function runHitPath(
  servers: HitPathServer[],
  reference: string,
  paths: () => string[],
  opts: HitPathOptions,
  started: (app: ShortenerProcess) => void,
) {
  const { log, profile } = opts;
  const apps: ShortenerProcess[] = new Array(servers.length);
  const order = servers
    .map((_, i) => i)
    .sort((a, b) => +!servers[a].startFirst - +!servers[b].startFirst);
  for (const i of order) {
    apps[i] = await servers[i].start({
      profiled: profile?.with === 'v8',
      nodeOptions: profile?.with === 'perf' ? perfNodeOptions(profile.dir) : [],
    });
    started(apps[i]);
  }
  const load = async (app: ShortenerProcess, durationS: number): Promise<HitPathRun> => {
    const before = processCpuMs(app.child.pid!);
    const request = { url: app.baseUrl, connections: opts.connections, expectStatus: 302 };
    const result = await runLoad({ ...request, durationS, paths: paths() });
    const after = processCpuMs(app.child.pid!);
    const cpuUs =
      before === undefined || after === undefined || result.requests === 0
        ? undefined
        : ((after - before) * 1000) / result.requests;
    return { ...result, loadAvg: loadavg()[0], cpuUs };
  };
  if (opts.warmupS > 0) for (const app of apps) await load(app, opts.warmupS);

  const runs = servers.map(() => [] as HitPathRun[]);
  for (let round = 1; round <= opts.rounds; round++) {
    log(`  round ${round} of ${opts.rounds}:`);
    // Each round starts one server further on, so that no server always runs after the same one.
    for (let k = 0; k < servers.length; k++) {
      const i = (round - 1 + k) % servers.length;
      const server = servers[i];
      const r = await load(apps[i], opts.durationS);
      runs[i].push(r);
      log(
        `    ${server.name}: ${Math.round(r.rps)} req/s, ${r.cpuUs?.toFixed(1) ?? '-'} µs CPU per request, p50 ${r.p50.toFixed(2)} ms, ` +
          `p99 ${r.p99.toFixed(2)} ms, ${r.unexpected} non-302, ${r.errors + r.timeouts} errors, load ${r.loadAvg.toFixed(1)}`,
      );
    }
  }

  const ref = servers.findIndex((s) => s.name === reference);
  const rows: HitPathRow[] = servers.map((server, i) => ({
    name: server.name,
    runs: runs[i],
    rps: median(runs[i].map((r) => r.rps)),
    cpuUs: runs[i].every((r) => r.cpuUs !== undefined)
      ? median(runs[i].map((r) => r.cpuUs!))
      : undefined,
    ratio: median(runs[i].map((r, round) => r.rps / runs[ref][round].rps)),
  }));

  if (profile) log(`  CPU profiles (${profile.with}, one more run each):`);
  for (const [i, server] of profile ? servers.entries() : []) {
    const base = join(profile!.dir, server.name.toLowerCase().replace(/[^a-z0-9]+/g, '-'));
    const file = profile!.with === 'v8' ? `${base}.cpuprofile` : `${base}.perf.data`;
    let result: HitPathRun;
    let shares: { origin: string; share: number }[];
    if (profile!.with === 'v8') {
      startCpuProfile(apps[i].child);
      result = await load(apps[i], opts.durationS);
      await writeCpuProfile(apps[i].child, file);
      const summary = summarizeProfile(file, 0);
      // The profile's busy time counts the time the process waited for a core on a loaded machine
      // too: the total is the process' CPU time when known.
      result.cpuUs ??= (summary.busyMs * 1000) / Math.max(1, result.requests);
      shares = summary.origins.map((o) => ({ origin: o.origin, share: o.pct / 100 }));
    } else {
      const recording = await recordPerf(apps[i].child.pid!, file);
      result = await load(apps[i], opts.durationS);
      await recording.stop();
      shares = perfShares(file);
    }
    const totalUs = result.cpuUs ?? NaN;
    const origins = shares.map((o) => ({ origin: o.origin, us: o.share * totalUs }));
    rows[i].cpu = { file, profiler: profile!.with, totalUs, origins };
    log(
      `    ${server.name}: ${Math.round(result.rps)} req/s profiled, ${totalUs.toFixed(1)} µs CPU per request (${file})`,
    );
  }
  return {
    connections: opts.connections,
    durationS: opts.durationS,
    rounds: opts.rounds,
    reference,
    rows,
  };
}

export function formatHitPath(report: HitPathReport): string {
  const med = (r: HitPathRow, f: (x: HitPathRun) => number) => median(r.runs.map(f));
  const total = (r: HitPathRow, f: (x: HitPathRun) => number) =>
    r.runs.reduce((s, x) => s + f(x), 0);
  const table = renderTable<HitPathRow>(
    [
      { header: 'server', value: (r) => r.name },
      { header: 'req/s (median)', value: (r) => Math.round(r.rps) },
      {
        header: 'req/s per round',
        value: (r) => r.runs.map((x) => Math.round(x.rps).toLocaleString('en-US')).join(' / '),
      },
      { header: `x ${report.reference}`, value: (r) => r.ratio, digits: 2 },
      { header: 'CPU µs/req', value: (r) => r.cpuUs, digits: 1 },
      { header: 'p50 ms', value: (r) => med(r, (x) => x.p50), digits: 2 },
      { header: 'p99 ms', value: (r) => med(r, (x) => x.p99), digits: 2 },
      { header: 'non-302', value: (r) => total(r, (x) => x.unexpected) },
      { header: 'errors', value: (r) => total(r, (x) => x.errors + x.timeouts) },
      { header: 'load', value: (r) => med(r, (x) => x.loadAvg), digits: 1 },
    ],
    report.rows,
  );
  const lines = [
    `Hit path (GET /:code -> 302), ${report.connections} connections, ${report.rounds} rounds of ` +
      `${report.durationS}s per server, interleaved; ratios within each round, then the median:`,
    table,
  ];
  const profiled = report.rows.filter((r) => r.cpu);
  if (profiled.length === 0) return lines.join('\n');
  const origins = new Map<string, number>();
  for (const r of profiled)
    for (const o of r.cpu!.origins)
      origins.set(o.origin, Math.max(origins.get(o.origin) ?? 0, o.us));
  const shown = [...origins].filter(([, us]) => us >= 0.5).sort((a, b) => b[1] - a[1]);
  type Line = { origin: string; of: (r: HitPathRow) => number };
  const usOf = (origin: string) => (r: HitPathRow) =>
    r.cpu!.origins.find((o) => o.origin === origin)?.us ?? 0;
  const cpuTable = renderTable<Line>(
    [
      { header: 'CPU µs per request', value: (x) => x.origin },
      ...profiled.map((r) => ({ header: r.name, value: (x: Line) => x.of(r), digits: 1 })),
    ],
    [
      { origin: 'total', of: (r) => r.cpu!.totalUs },
      ...shown.map(([origin]) => ({ origin, of: usOf(origin) })),
    ],
  );
  const how =
    profiled[0].cpu!.profiler === 'perf'
      ? 'perf, on-CPU samples; each to the origin of the closest JavaScript frame on its stack'
      : "V8's sampler, self time; on a loaded machine it also counts time spent waiting for a core";
  lines.push(
    '',
    `Where the CPU goes, µs per request (the process' CPU time from /proc, split as the profile says: ${how}):`,
    cpuTable,
  );
  return lines.join('\n');
}
