import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { Client } from 'pg';
import { collectEnvInfo, EnvInfo, formatEnvInfo } from '../shared/env-info';
import { renderTable } from '../shared/table';
import { ShortenerProcess, StartOptions } from './app-process';
import {
  formatHitPath,
  HIT_PATH_TARGET_ROW,
  HitPathReport,
  HitPathServer,
  runHitPath,
} from './hit-path';
import { LoadResult, runLoad } from './load';

export type Strategy = 'sequence' | 'hash' | 'snowflake';

/** The parts of the benchmark; `--only` picks some. */
export const SECTIONS = ['redirects', 'lifetime', 'creation', 'hit-path'] as const;
export type Section = (typeof SECTIONS)[number];

/** The hit path's target: the cached redirect with L1 at this share of the bare Nest route. */
export const HIT_PATH_TARGET = 0.9;
const BARE_NEST = 'bare Nest + Fastify';

export interface ShortenerBenchOptions {
  redisUrl: string;
  databaseUrl: string;
  /** DB_POOL_SIZE of the app (the article: HikariCP 10). */
  pool: number;
  /** Redirect load levels (the article: 20, 50, 100 VUs). */
  connections: number[];
  durationS: number;
  warmupS: number;
  /** Codes the redirect runs cycle through. */
  hotCodes: number;
  stressConnections: number;
  stressDurationS: number;
  /** CACHE_TTL of the cache-lifetime run, seconds. */
  lifetimeTtlS: number;
  lifetimeDurationS: number;
  strategies: Strategy[];
  createConnections: number;
  createDurationS: number;
  /** Start the built app (dist/...) instead of src/main.ts through register-ts. */
  built: boolean;
  sections: Section[];
  hitConnections: number;
  hitDurationS: number;
  /** Rounds of the hit path (each runs every server once). */
  hitRounds: number;
  /** Profile the hit path's servers (one more run each) into `dir` (see HitPathOptions). */
  profile?: { dir: string; with: 'v8' | 'perf' };
  log: (line: string) => void;
}

export const DEFAULTS: Omit<ShortenerBenchOptions, 'redisUrl' | 'log'> = {
  databaseUrl: 'postgres://postgres@127.0.0.1:5432/test',
  pool: 10,
  connections: [20, 50, 100],
  durationS: 10,
  warmupS: 2,
  hotCodes: 10,
  stressConnections: 500,
  stressDurationS: 10,
  lifetimeTtlS: 2,
  lifetimeDurationS: 10,
  strategies: ['sequence', 'hash', 'snowflake'],
  createConnections: 50,
  createDurationS: 10,
  built: false,
  sections: [...SECTIONS],
  hitConnections: 100,
  hitDurationS: 10,
  hitRounds: 3,
};

export interface RedirectRow extends LoadResult {
  mode: 'db-only' | 'cached';
  dbLookups: number;
  /** Cache operations that failed or timed out (each such call was answered from the database). */
  storeErrors: number;
  /** 1-minute load average of the machine at the end of the row (2 cores: above 2 means queuing). */
  loadAvg: number;
}

export interface CreateRow extends LoadResult {
  strategy: Strategy;
}

export interface Target {
  name: string;
  met: boolean;
  detail: string;
}

export interface ShortenerBenchReport {
  env: EnvInfo & { postgres: string; app: string };
  options: Omit<ShortenerBenchOptions, 'log' | 'redisUrl'>;
  redirect: RedirectRow[];
  stress: RedirectRow[];
  lifetime?: RedirectRow & { ttlS: number; bound: number };
  create: CreateRow[];
  hitPath?: HitPathReport;
  targets: Target[];
}

const ms = (digits = 2) => ({ digits });

export async function runShortenerBench(
  opts: ShortenerBenchOptions,
): Promise<ShortenerBenchReport> {
  const { log } = opts;
  const id = randomBytes(4).toString('hex');
  const table = `bench_${id}`;
  const prefix = `bench:shortener:${id}:`;
  const redis = new Redis(opts.redisUrl);
  const pg = new Client({ connectionString: opts.databaseUrl, connectionTimeoutMillis: 5000 });
  try {
    await pg.connect();
  } catch (err) {
    await redis.quit();
    throw new Error(
      `PostgreSQL is not reachable at ${opts.databaseUrl} (${(err as Error).message}): start it or pass --database-url`,
    );
  }
  const tables: string[] = [table];
  const apps: ShortenerProcess[] = [];
  const start = async (
    env: Record<string, string>,
    extra: Pick<StartOptions, 'profiled' | 'nodeOptions'> = {},
  ) => {
    const app = await ShortenerProcess.start(
      {
        DATABASE_URL: opts.databaseUrl,
        DATABASE_TABLE: table,
        DB_POOL_SIZE: String(opts.pool),
        REDIS_URL: opts.redisUrl,
        REDIS_KEY_PREFIX: prefix,
        PUBLIC_BASE_URL: 'http://sho.rt',
        ...env,
      },
      { built: opts.built, ...extra },
    );
    apps.push(app);
    return app;
  };
  const has = (section: Section) => opts.sections.includes(section);
  const stop = async (app: ShortenerProcess) => {
    await app.stop();
    apps.splice(apps.indexOf(app), 1);
  };

  try {
    const { rows } = await pg.query<{ server_version: string }>('SHOW server_version');
    const env = {
      ...(await collectEnvInfo(redis, opts.redisUrl, [
        '@nestjs/core',
        '@nestjs/platform-fastify',
        'fastify',
        'ioredis',
        'pg',
        'autocannon',
      ])),
      postgres: rows[0].server_version,
      app: opts.built ? 'built (dist/.../main.js)' : 'src/main.ts through scripts/register-ts.js',
    };
    log(formatEnvInfo(env));
    log(`postgres ${env.postgres} (${opts.databaseUrl}) | app: ${env.app}, pool ${opts.pool}`);
    log(
      'note: app, load generator, PostgreSQL and Redis share this machine; other work on it adds noise\n',
    );

    const redirect: RedirectRow[] = [];
    const stress: RedirectRow[] = [];
    /** The hot codes and their URLs, created on the first app started. */
    const targets = new Map<string, string>();
    const paths = () => [...targets.keys()].map((c) => `/${c}`);
    const createCodes = async (app: ShortenerProcess) => {
      for (let i = targets.size; i < opts.hotCodes; i++) {
        const res = await fetch(`${app.baseUrl}/urls`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ url: `https://example.com/hot/${id}/${i}` }),
        });
        const created = (await res.json()) as { code: string; url: string };
        targets.set(created.code, created.url);
      }
    };

    async function redirectRun(
      app: ShortenerProcess,
      mode: RedirectRow['mode'],
      connections: number,
      durationS: number,
    ): Promise<RedirectRow> {
      const before = await app.counters();
      const load = await runLoad({
        url: app.baseUrl,
        connections,
        durationS,
        expectStatus: 302,
        paths: paths(),
      });
      const after = await app.counters();
      const row = {
        mode,
        ...load,
        dbLookups: after.dbLookups - before.dbLookups,
        storeErrors: after.storeErrors - before.storeErrors,
        loadAvg: loadavg()[0],
      };
      log(
        `  ${mode} ${connections} conns: ${Math.round(row.rps)} req/s, p95 ${row.p95.toFixed(2)} ms, ` +
          `p99 ${row.p99.toFixed(2)} ms, ${row.dbLookups} lookups, ${row.storeErrors} cache errors, ` +
          `${row.unexpected} non-302, ${row.errors} errors, load ${row.loadAvg.toFixed(1)}`,
      );
      return row;
    }

    let hitPath: HitPathReport | undefined;
    if (has('hit-path')) {
      const profile = opts.profile && { ...opts.profile, dir: resolve(opts.profile.dir) };
      if (profile) mkdirSync(profile.dir, { recursive: true });
      log(`hit path, ${opts.hitConnections} connections:`);
      const bare =
        (file: string, env: Record<string, string> = {}) =>
        (extra: Pick<StartOptions, 'profiled' | 'nodeOptions'>) =>
          ShortenerProcess.start(
            { BARE_TARGETS: JSON.stringify(Object.fromEntries(targets)), ...env },
            { entry: join(__dirname, file), ...extra },
          );
      const servers: HitPathServer[] = [
        { name: 'bare Fastify', start: bare('bare-fastify.ts') },
        { name: BARE_NEST, start: bare('bare-nest.ts') },
        // The same route with the shortener's server options (timeouts, keep-alive, limits).
        {
          name: `${BARE_NEST}, app's options`,
          start: bare('bare-nest.ts', { BARE_SERVER_OPTIONS: 'app' }),
        },
        {
          name: HIT_PATH_TARGET_ROW,
          startFirst: true,
          start: async (extra) => {
            const app = await start({ CACHE_TTL: '10m', CACHE_L1_ENTRIES: '10000' }, extra);
            await createCodes(app);
            return app;
          },
        },
        {
          name: 'cached, Redis only',
          start: (extra) => start({ CACHE_TTL: '10m' }, extra),
        },
      ];
      hitPath = await runHitPath(
        servers,
        BARE_NEST,
        paths,
        {
          connections: opts.hitConnections,
          durationS: opts.hitDurationS,
          warmupS: Math.max(opts.warmupS, 1),
          rounds: opts.hitRounds,
          profile,
          log,
        },
        (app) => {
          if (!apps.includes(app)) apps.push(app);
        },
      );
      for (const app of [...apps]) await stop(app);
    }

    for (const mode of ['db-only', 'cached'] as const) {
      if (!has('redirects')) break;
      log(`redirects, ${mode}:`);
      const app = await start({ CACHE_ENABLED: String(mode === 'cached'), CACHE_TTL: '10m' });
      await createCodes(app);
      if (opts.warmupS > 0) {
        // JIT and connection pools warm; the cache stays cold for the first measured run
        // only in db-only mode (cached mode warms it here).
        await runLoad({
          url: app.baseUrl,
          connections: 20,
          durationS: opts.warmupS,
          expectStatus: 302,
          paths: paths(),
        });
      }
      for (const c of opts.connections) {
        redirect.push(await redirectRun(app, mode, c, opts.durationS));
      }
      stress.push(await redirectRun(app, mode, opts.stressConnections, opts.stressDurationS));
      await stop(app);
    }

    let lifetime: ShortenerBenchReport['lifetime'];
    if (has('lifetime')) {
      log(`one lookup per hot code per cache lifetime (CACHE_TTL ${opts.lifetimeTtlS}s):`);
      const lifeApp = await start({ CACHE_TTL: `${opts.lifetimeTtlS}s` });
      await createCodes(lifeApp);
      await redis.eval(
        "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end",
        0,
        `${prefix}*`,
      );
      const lifeRow = await redirectRun(lifeApp, 'cached', 100, opts.lifetimeDurationS);
      await stop(lifeApp);
      // Jitter makes lifetimes 0.9..1.1 x TTL: at most one load per code at the start and one
      // per shortest lifetime after it.
      const bound = opts.hotCodes * (1 + Math.floor(lifeRow.durationS / (0.9 * opts.lifetimeTtlS)));
      lifetime = { ...lifeRow, ttlS: opts.lifetimeTtlS, bound };
    }

    const create: CreateRow[] = [];
    if (has('creation')) log('creation:');
    for (const strategy of has('creation') ? opts.strategies : []) {
      const strategyTable = `${table}_${strategy}`;
      tables.push(strategyTable);
      const app = await start({ CODE_STRATEGY: strategy, DATABASE_TABLE: strategyTable });
      const load = await runLoad({
        url: `${app.baseUrl}/urls`,
        connections: opts.createConnections,
        durationS: opts.createDurationS,
        expectStatus: 201,
        method: 'POST',
        body: `{"url":"https://example.com/new/${id}/[<id>]"}`,
      });
      create.push({ strategy, ...load });
      log(
        `  ${strategy}: ${Math.round(load.rps)} creates/s, p95 ${load.p95.toFixed(2)} ms, ` +
          `${load.unexpected} non-201, ${load.errors} errors`,
      );
      await stop(app);
    }

    const report: ShortenerBenchReport = {
      env,
      options: { ...opts, log: undefined, redisUrl: undefined } as ShortenerBenchReport['options'],
      redirect,
      stress,
      lifetime,
      create,
      hitPath,
      targets: targetsOf(redirect, stress, lifetime, hitPath, opts),
    };
    log(`\n${formatReport(report)}`);
    return report;
  } finally {
    for (const app of apps) await app.stop();
    for (const t of tables)
      await pg.query(`DROP TABLE IF EXISTS ${t}, ${t}_meta`).catch(() => undefined);
    await pg.end();
    await redis
      .eval(
        "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end",
        0,
        `${prefix}*`,
      )
      .catch(() => undefined);
    await redis.quit();
  }
}

function targetsOf(
  redirect: RedirectRow[],
  stress: RedirectRow[],
  lifetime: ShortenerBenchReport['lifetime'],
  hitPath: HitPathReport | undefined,
  opts: ShortenerBenchOptions,
): Target[] {
  const targets: Target[] = [];
  const cachedHit = hitPath?.rows.find((r) => r.name === HIT_PATH_TARGET_ROW);
  if (hitPath && cachedHit) {
    targets.push({
      name: `${HIT_PATH_TARGET_ROW} >= ${HIT_PATH_TARGET * 100} % of ${hitPath.reference} at ${hitPath.connections} connections`,
      met: cachedHit.ratio >= HIT_PATH_TARGET,
      detail: hitPath.rows
        .map((r) => `${r.name} ${Math.round(r.rps)} req/s = ${Math.round(r.ratio * 100)} %`)
        .join(', '),
    });
  }
  if (redirect.length > 0) targets.push(...redirectTargets(redirect, stress, opts));
  if (lifetime) targets.push(lifetimeTarget(redirect, lifetime, opts));
  return targets;
}

function redirectTargets(
  redirect: RedirectRow[],
  stress: RedirectRow[],
  opts: ShortenerBenchOptions,
): Target[] {
  const top = Math.max(...opts.connections);
  const dbOnly = redirect.find((r) => r.mode === 'db-only' && r.connections === top);
  const cached = redirect.find((r) => r.mode === 'cached' && r.connections === top);
  const ratio = dbOnly && cached ? cached.rps / dbOnly.rps : NaN;
  const cachedStress = stress.find((r) => r.mode === 'cached');
  const stressTrouble = stress.map(
    (r) => `${r.mode}: ${r.errors} errors, ${r.timeouts} timeouts, ${r.unexpected} non-302`,
  );
  return [
    {
      name: `cached >= 2x DB-only redirect throughput at ${top} connections`,
      met: ratio >= 2,
      detail: `${Math.round(cached?.rps ?? NaN)} vs ${Math.round(dbOnly?.rps ?? NaN)} req/s = ${ratio.toFixed(2)}x`,
    },
    {
      name: `no errors at ${opts.stressConnections} connections`,
      met: stress.every((r) => r.errors === 0 && r.timeouts === 0 && r.unexpected === 0),
      detail: `${stressTrouble.join('; ')}${cachedStress ? '' : ' (no cached run)'}`,
    },
  ];
}

function lifetimeTarget(
  redirect: RedirectRow[],
  lifetime: NonNullable<ShortenerBenchReport['lifetime']>,
  opts: ShortenerBenchOptions,
): Target {
  const cachedRows = redirect.filter((r) => r.mode === 'cached');
  const cachedLookups = cachedRows.reduce((s, r) => s + r.dbLookups, 0);
  const cacheErrors = cachedRows.reduce((s, r) => s + r.storeErrors, 0) + lifetime.storeErrors;
  return {
    name: 'one DB lookup per hot code per cache lifetime',
    met: cachedLookups === 0 && lifetime.dbLookups <= lifetime.bound,
    detail:
      (cachedRows.length > 0
        ? `CACHE_TTL 10m: ${cachedLookups} lookups in the measured cached runs (the ${opts.hotCodes} codes loaded once in the warm-up); `
        : '') +
      `CACHE_TTL ${lifetime.ttlS}s over ${lifetime.durationS}s: ${lifetime.dbLookups} lookups for ${opts.hotCodes} codes ` +
      `(at most ${lifetime.bound} allowed) of ${lifetime.requests} redirects` +
      (cacheErrors
        ? `; ${cacheErrors} cache operations failed or timed out (REDIS_OPERATION_TIMEOUT) and were answered from the database`
        : ''),
  };
}

export function formatReport(report: ShortenerBenchReport): string {
  const rows: (Omit<RedirectRow, 'mode'> & { mode: string })[] = [
    ...report.redirect,
    ...report.stress,
  ];
  if (report.lifetime)
    rows.push({ ...report.lifetime, mode: `cached, TTL ${report.lifetime.ttlS}s` });
  const redirectTable = renderTable<Omit<RedirectRow, 'mode'> & { mode: string }>(
    [
      { header: 'mode', value: (r) => r.mode },
      { header: 'conns', value: (r) => r.connections },
      { header: 'req/s', value: (r) => Math.round(r.rps) },
      { header: 'p50 ms', value: (r) => r.p50, ...ms() },
      { header: 'p95 ms', value: (r) => r.p95, ...ms() },
      { header: 'p99 ms', value: (r) => r.p99, ...ms() },
      { header: 'max ms', value: (r) => r.max, ...ms() },
      { header: 'requests', value: (r) => r.requests },
      { header: 'DB lookups', value: (r) => r.dbLookups },
      { header: 'cache errors', value: (r) => r.storeErrors },
      { header: 'non-302', value: (r) => r.unexpected },
      { header: 'errors', value: (r) => r.errors + r.timeouts },
      { header: 'load', value: (r) => r.loadAvg, digits: 1 },
    ],
    rows,
  );
  const createTable = renderTable<CreateRow>(
    [
      { header: 'strategy', value: (r) => r.strategy },
      { header: 'conns', value: (r) => r.connections },
      { header: 'creates/s', value: (r) => Math.round(r.rps) },
      { header: 'p50 ms', value: (r) => r.p50, ...ms() },
      { header: 'p95 ms', value: (r) => r.p95, ...ms() },
      { header: 'p99 ms', value: (r) => r.p99, ...ms() },
      { header: 'created', value: (r) => r.requests - r.unexpected },
      { header: 'non-201', value: (r) => r.unexpected },
      { header: 'errors', value: (r) => r.errors + r.timeouts },
    ],
    report.create,
  );
  const targets = report.targets
    .map((t) => `  [${t.met ? 'met' : 'NOT met'}] ${t.name}: ${t.detail}`)
    .join('\n');
  const parts: string[] = [];
  if (report.hitPath) parts.push(formatHitPath(report.hitPath), '');
  if (rows.length > 0) {
    parts.push(
      `Redirects (GET /:code -> 302), ${report.options.hotCodes} hot codes, ${report.options.durationS}s per row, PostgreSQL pool ${report.options.pool}:`,
      redirectTable,
      '',
    );
  }
  if (report.create.length > 0) {
    parts.push(
      `Creation (POST /urls, a new URL per request), ${report.options.createDurationS}s per row:`,
      createTable,
      '',
    );
  }
  parts.push('Targets:', targets);
  return parts.join('\n');
}
