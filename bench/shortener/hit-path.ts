/*
 * The hit path: the shortener's cached redirect against the same 302 from a bare Fastify route
 * (the framework floor) and from a bare Nest + Fastify route (Nest's own ceiling), measured in
 * one run by the same load generator with the same connections. The servers run side by side;
 * the rows are interleaved in rounds, so that a change in the machine's load reaches them all,
 * and each row's ratio to the bare Nest route is taken within a round.
 */
import { join } from 'node:path';
import { loadavg } from 'node:os';
import { summarizeProfile } from '../shared/cpu-profile';
import { renderTable } from '../shared/table';
import type { ShortenerProcess, StartOptions } from './app-process';
import { LoadResult, runLoad } from './load';
import { perfNodeOptions, perfShares, recordPerf } from './perf-profile';

export interface HitPathServer {
  name: string;
  start(options: Pick<StartOptions, 'profiled' | 'nodeOptions'>): Promise<ShortenerProcess>;
  /** Started before the others (the shortener, which creates the codes the others answer). */
  startFirst?: boolean;
}

export interface HitPathOptions {
  connections: number;
  durationS: number;
  warmupS: number;
  rounds: number;
  /**
   * Profile each server over one more run (not one of the rounds), writing the profiles here:
   * V8's sampler (.cpuprofile, for DevTools), or Linux perf (on-CPU samples only: see
   * perf-profile.ts), which the table of where the CPU goes then comes from.
   */
  profile?: { dir: string; with: 'v8' | 'perf' };
  log: (line: string) => void;
}

/** CPU time of a server per request, from its profiled run. */
export interface RequestCpu {
  file: string;
  profiler: 'v8' | 'perf';
  requests: number;
  /** µs of CPU per request, all of it (the process' CPU time from /proc, else the profile's). */
  totalUs: number;
  /** µs per request by origin (package, Node internals, GC, ...), largest first. */
  origins: { origin: string; us: number }[];
}

export type HitPathRun = LoadResult & {
  loadAvg: number;
  /** CPU time of the server per response, µs (from /proc; undefined elsewhere). */
  cpuUs?: number;
};

export interface HitPathRow {
  name: string;
  runs: HitPathRun[];
  /** Median over the rounds. */
  rps: number;
  /** Median over the rounds, µs. */
  cpuUs?: number;
  /** Median over the rounds of rps / the reference's rps in the same round. */
  ratio: number;
  cpu?: RequestCpu;
}

export interface HitPathReport {
  connections: number;
  durationS: number;
  rounds: number;
  reference: string;
  rows: HitPathRow[];
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/**
 * Starts `servers` (all at once), warms each, then runs `rounds` rounds of one load run per
 * server. `reference` names the row the ratios are taken against.
 */
export async function runHitPath(
  servers: HitPathServer[],
  reference: string,
  paths: () => string[],
  opts: HitPathOptions,
  started: (app: ShortenerProcess) => void,
): Promise<HitPathReport> {
  const { log } = opts;
  const apps: ShortenerProcess[] = new Array(servers.length);
  const order = servers
    .map((_, i) => i)
    .sort((a, b) => +!servers[a].startFirst - +!servers[b].startFirst);
  const profile = opts.profile;
  for (const i of order) {
    apps[i] = await servers[i].start({
      profiled: profile?.with === 'v8',
      nodeOptions: profile?.with === 'perf' ? perfNodeOptions(profile.dir) : [],
    });
    started(apps[i]);
  }
  const load = async (app: ShortenerProcess, durationS: number): Promise<HitPathRun> => {
    const before = app.cpuTimeMs();
    const result = await runLoad({
      url: app.baseUrl,
      connections: opts.connections,
      durationS,
      expectStatus: 302,
      paths: paths(),
    });
    const after = app.cpuTimeMs();
    const cpuUs =
      before === undefined || after === undefined || result.requests === 0
        ? undefined
        : ((after - before) * 1000) / result.requests;
    return { ...result, loadAvg: loadavg()[0], cpuUs };
  };
  if (opts.warmupS > 0) for (const app of apps) await load(app, opts.warmupS);

  const runs = servers.map(() => [] as HitPathRow['runs']);
  for (let round = 1; round <= opts.rounds; round++) {
    log(`  round ${round} of ${opts.rounds}:`);
    for (const [i, server] of servers.entries()) {
      const result = await load(apps[i], opts.durationS);
      runs[i].push(result);
      log(
        `    ${server.name}: ${Math.round(result.rps)} req/s, ${result.cpuUs?.toFixed(1) ?? '-'} µs CPU per request, p50 ${result.p50.toFixed(2)} ms, ` +
          `p99 ${result.p99.toFixed(2)} ms, ${result.unexpected} non-302, ` +
          `${result.errors + result.timeouts} errors, load ${result.loadAvg.toFixed(1)}`,
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

  if (profile) {
    log(`  CPU profiles (${profile.with}, one more run each):`);
    for (const [i, server] of servers.entries()) {
      const base = join(profile.dir, slug(server.name));
      let result: HitPathRun;
      if (profile.with === 'v8') {
        apps[i].startProfile();
        result = await load(apps[i], opts.durationS);
        await apps[i].writeProfile(`${base}.cpuprofile`);
        rows[i].cpu = requestCpu(`${base}.cpuprofile`, result.requests, result.cpuUs);
      } else {
        const recording = await recordPerf(apps[i].pid, `${base}.perf.data`);
        result = await load(apps[i], opts.durationS);
        await recording.stop();
        const totalUs = result.cpuUs ?? NaN;
        rows[i].cpu = {
          file: `${base}.perf.data`,
          profiler: 'perf',
          requests: result.requests,
          totalUs,
          origins: perfShares(`${base}.perf.data`).map((o) => ({
            origin: o.origin,
            us: o.share * totalUs,
          })),
        };
      }
      const file = rows[i].cpu!.file;
      log(
        `    ${server.name}: ${Math.round(result.rps)} req/s profiled, ` +
          `${rows[i].cpu!.totalUs.toFixed(1)} µs CPU per request (${file})`,
      );
    }
  }
  return {
    connections: opts.connections,
    durationS: opts.durationS,
    rounds: opts.rounds,
    reference,
    rows,
  };
}

function slug(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');
}

/**
 * The CPU per request of a profiled run, split by origin in the profile's proportions. The
 * profile's own busy time counts the time the process waited for a core on a loaded machine too,
 * so the total is the process' CPU time (`measuredUs`) when known.
 */
export function requestCpu(file: string, requests: number, measuredUs?: number): RequestCpu {
  const summary = summarizeProfile(file, 0);
  const totalUs = measuredUs ?? (summary.busyMs * 1000) / Math.max(1, requests);
  return {
    file,
    profiler: 'v8',
    requests,
    totalUs,
    origins: summary.origins.map((o) => ({ origin: o.origin, us: (o.pct / 100) * totalUs })),
  };
}

export function formatHitPath(report: HitPathReport): string {
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
      { header: 'p50 ms', value: (r) => median(r.runs.map((x) => x.p50)), digits: 2 },
      { header: 'p99 ms', value: (r) => median(r.runs.map((x) => x.p99)), digits: 2 },
      { header: 'non-302', value: (r) => r.runs.reduce((s, x) => s + x.unexpected, 0) },
      { header: 'errors', value: (r) => r.runs.reduce((s, x) => s + x.errors + x.timeouts, 0) },
      { header: 'load', value: (r) => median(r.runs.map((x) => x.loadAvg)), digits: 1 },
    ],
    report.rows,
  );
  const lines = [
    `Hit path (GET /:code -> 302), ${report.connections} connections, ${report.rounds} rounds of ` +
      `${report.durationS}s per server, interleaved; ratios within each round, then the median:`,
    table,
  ];
  const profiled = report.rows.filter((r) => r.cpu);
  if (profiled.length > 0) {
    const origins = new Map<string, number>();
    for (const r of profiled)
      for (const o of r.cpu!.origins) {
        origins.set(o.origin, Math.max(origins.get(o.origin) ?? 0, o.us));
      }
    const shown = [...origins].filter(([, us]) => us >= 0.5).sort((a, b) => b[1] - a[1]);
    const usOf = (r: HitPathRow, origin: string) =>
      r.cpu!.origins.find((o) => o.origin === origin)?.us ?? 0;
    const cpuTable = renderTable<{ origin: string; of: (r: HitPathRow) => number }>(
      [
        { header: 'CPU µs per request', value: (x) => x.origin },
        ...profiled.map((r) => ({
          header: r.name,
          value: (x: { of: (r: HitPathRow) => number }) => x.of(r),
          digits: 1,
        })),
      ],
      [
        { origin: 'total', of: (r) => r.cpu!.totalUs },
        ...shown.map(([origin]) => ({ origin, of: (r: HitPathRow) => usOf(r, origin) })),
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
  }
  return lines.join('\n');
}

export const HIT_PATH_TARGET_ROW = 'cached, L1';
