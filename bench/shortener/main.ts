/*
 * npm run bench:shortener -- [options]   (--help lists them; options.ts)
 *
 * Needs REDIS_URL (the npm script sets it through scripts/with-redis.js) and PostgreSQL.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { Client } from 'pg';
import { cliOptions, UsageError } from '../shared/args';
import { columns } from '../shared/columns';
import { collectEnvInfo, formatEnvInfo } from '../shared/env-info';
import { LoadResult, runLoad } from '../shared/load';
import { deleteKeys } from '../shared/redis-stats';
import { renderTable } from '../shared/table';
import { ShortenerProcess, StartOptions, startShortener } from './app-process';
import { formatHitPath, HitPathReport, HitPathServer, runHitPath } from './hit-path';
import { Section, ShortenerBenchOptions, SPEC } from './options';
import { perfUnavailable } from './perf-profile';

/** The hit path's target: the cached redirect with L1 at this share of the bare Nest route. */
const HIT_PATH_TARGET = 0.9;
const HIT_PATH_TARGET_ROW = 'cached, L1';
const BARE_NEST = 'bare Nest + Fastify';

/**
 * `storeErrors`: cache operations that failed or timed out (each such call was answered from the
 * database); `loadAvg`: the 1-minute load average at the end of the row (2 cores: above 2 means queuing).
 */
type RedirectRow = LoadResult & {
  mode: string;
  dbLookups: number;
  storeErrors: number;
  loadAvg: number;
};
type CreateRow = LoadResult & { strategy: string };
type Target = { name: string; met: boolean; detail: string };
type Lifetime = RedirectRow & { ttlS: number; bound: number };
type Extra = Pick<StartOptions, 'profiled' | 'nodeOptions'>;

export async function runShortenerBench(o: ShortenerBenchOptions) {
  const { log } = o;
  const id = randomBytes(4).toString('hex');
  const table = `bench_${id}`;
  const prefix = `bench:shortener:${id}:`;
  const redis = new Redis(o.redisUrl);
  const pg = new Client({ connectionString: o['database-url'], connectionTimeoutMillis: 5000 });
  await pg.connect().catch(async (err: Error) => {
    await redis.quit();
    throw new Error(
      `PostgreSQL is not reachable at ${o['database-url']} (${err.message}): start it or pass --database-url`,
    );
  });
  const tables: string[] = [table];
  const apps: ShortenerProcess[] = [];
  const start = async (env: Record<string, string>, extra: Extra = {}) => {
    const app = await startShortener(
      {
        ...{ DATABASE_URL: o['database-url'], DATABASE_TABLE: table, DB_POOL_SIZE: String(o.pool) },
        ...{ REDIS_URL: o.redisUrl, REDIS_KEY_PREFIX: prefix, PUBLIC_BASE_URL: 'http://sho.rt' },
        ...env,
      },
      { built: o.built, ...extra },
    );
    apps.push(app);
    return app;
  };
  const has = (section: Section) => o.only.includes(section);
  const stop = async (app: ShortenerProcess) => {
    await app.stop();
    apps.splice(apps.indexOf(app), 1);
  };

  try {
    const { rows } = await pg.query<{ server_version: string }>('SHOW server_version');
    const packages = ['@nestjs/core', '@nestjs/platform-fastify', 'fastify', 'ioredis', 'pg'];
    const env = {
      ...(await collectEnvInfo(redis, o.redisUrl, [...packages, 'autocannon'])),
      postgres: rows[0].server_version,
      app: o.built ? 'built (dist/.../main.js)' : 'src/main.ts through scripts/register-ts.js',
    };
    log(formatEnvInfo(env));
    log(`postgres ${env.postgres} (${o['database-url']}) | app: ${env.app}, pool ${o.pool}`);
    log(
      'note: app, load generator, PostgreSQL and Redis share this machine; other work on it adds noise\n',
    );

    /** The hot codes and their URLs, created on the first app started. */
    const targets = new Map<string, string>();
    const paths = () => [...targets.keys()].map((c) => `/${c}`);
    const createCodes = async (app: ShortenerProcess) => {
      for (let i = targets.size; i < o['hot-codes']; i++) {
        const res = await fetch(`${app.baseUrl}/urls`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ url: `https://example.com/hot/${id}/${i}` }),
        });
        const created = (await res.json()) as { code: string; url: string };
        targets.set(created.code, created.url);
      }
    };
    const redirects = (app: ShortenerProcess, connections: number, durationS: number) =>
      runLoad({ url: app.baseUrl, connections, durationS, expectStatus: 302, paths: paths() });
    const redirectRun = async (app: ShortenerProcess, mode: string, conns: number, s: number) => {
      const before = await app.counters();
      const load = await redirects(app, conns, s);
      const after = await app.counters();
      const dbLookups = after.dbLookups - before.dbLookups;
      const storeErrors = after.storeErrors - before.storeErrors;
      const row: RedirectRow = { mode, ...load, dbLookups, storeErrors, loadAvg: loadavg()[0] };
      log(
        `  ${mode} ${conns} conns: ${Math.round(row.rps)} req/s, p95 ${row.p95.toFixed(2)} ms, ` +
          `p99 ${row.p99.toFixed(2)} ms, ${row.dbLookups} lookups, ${row.storeErrors} cache errors, ` +
          `${row.unexpected} non-302, ${row.errors} errors, load ${row.loadAvg.toFixed(1)}`,
      );
      return row;
    };

    let hitPath: HitPathReport | undefined;
    if (has('hit-path')) {
      const dir = o.perf ?? o['cpu-prof'];
      const profile = dir && {
        dir: resolve(dir),
        with: o.perf ? ('perf' as const) : ('v8' as const),
      };
      if (profile) mkdirSync(profile.dir, { recursive: true });
      log(`hit path, ${o['hit-connections']} connections:`);
      const bare =
        (server: 'fastify' | 'nest', env: Record<string, string> = {}) =>
        (extra: Extra) =>
          startShortener(
            {
              BARE_TARGETS: JSON.stringify(Object.fromEntries(targets)),
              BARE_SERVER: server,
              ...env,
            },
            { entry: join(__dirname, 'bare-server.ts'), ...extra },
          );
      const servers: HitPathServer[] = [
        { name: 'bare Fastify', start: bare('fastify') },
        { name: BARE_NEST, start: bare('nest') },
        // The reference again, in a process of its own: how far one server's ratio strays by chance.
        { name: `${BARE_NEST}, second process`, start: bare('nest') },
        // The same route with the shortener's server options (timeouts, keep-alive, limits).
        {
          name: `${BARE_NEST}, app's options`,
          start: bare('nest', { BARE_SERVER_OPTIONS: 'app' }),
        },
        // The same route answering in a later turn, as a server waiting on Redis does.
        {
          name: `${BARE_NEST}, after setImmediate`,
          start: bare('nest', { BARE_DEFER: 'immediate' }),
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
        { name: 'cached, Redis only', start: (extra) => start({ CACHE_TTL: '10m' }, extra) },
      ];
      hitPath = await runHitPath(
        servers,
        BARE_NEST,
        paths,
        {
          ...{ connections: o['hit-connections'], durationS: o['hit-duration'] },
          ...{
            warmupS: Math.max(o.warmup, 1),
            rounds: o['hit-rounds'],
            profile: profile || undefined,
            log,
          },
        },
        (app) => {
          if (!apps.includes(app)) apps.push(app);
        },
      );
      for (const app of [...apps]) await stop(app);
    }

    const redirect: RedirectRow[] = [];
    const stress: RedirectRow[] = [];
    for (const mode of has('redirects') ? (['db-only', 'cached'] as const) : []) {
      log(`redirects, ${mode}:`);
      const app = await start({ CACHE_ENABLED: String(mode === 'cached'), CACHE_TTL: '10m' });
      await createCodes(app);
      // JIT and connection pools warm; the cache stays cold for the first measured run only in
      // db-only mode (cached mode warms it here).
      if (o.warmup > 0) await redirects(app, 20, o.warmup);
      for (const c of o.connections) redirect.push(await redirectRun(app, mode, +c, o.duration));
      stress.push(await redirectRun(app, mode, o['stress-connections'], o['stress-duration']));
      await stop(app);
    }

    let lifetime: Lifetime | undefined;
    if (has('lifetime')) {
      const ttlS = o['lifetime-ttl'];
      log(`one lookup per hot code per cache lifetime (CACHE_TTL ${ttlS}s):`);
      const lifeApp = await start({ CACHE_TTL: `${ttlS}s` });
      await createCodes(lifeApp);
      await deleteKeys(redis, prefix);
      const lifeRow = await redirectRun(lifeApp, 'cached', 100, o['lifetime-duration']);
      await stop(lifeApp);
      // Jitter makes lifetimes 0.9..1.1 x TTL: at most one load per code at the start and one
      // per shortest lifetime after it.
      const bound = o['hot-codes'] * (1 + Math.floor(lifeRow.durationS / (0.9 * ttlS)));
      lifetime = { ...lifeRow, ttlS, bound };
    }

    const create: CreateRow[] = [];
    if (has('creation')) log('creation:');
    for (const strategy of has('creation') ? o.strategies : []) {
      const strategyTable = `${table}_${strategy}`;
      tables.push(strategyTable);
      const app = await start({ CODE_STRATEGY: strategy, DATABASE_TABLE: strategyTable });
      const load = await runLoad({
        ...{ url: `${app.baseUrl}/urls`, connections: o['create-connections'] },
        ...{ durationS: o['create-duration'], expectStatus: 201, method: 'POST' },
        body: `{"url":"https://example.com/new/${id}/[<id>]"}`,
      });
      create.push({ strategy, ...load });
      log(
        `  ${strategy}: ${Math.round(load.rps)} creates/s, p95 ${load.p95.toFixed(2)} ms, ` +
          `${load.unexpected} non-201, ${load.errors} errors`,
      );
      await stop(app);
    }

    const { log: _log, redisUrl: _url, ...options } = o;
    const report = {
      env,
      options,
      redirect,
      stress,
      lifetime,
      create,
      hitPath,
      targets: [] as Target[],
    };
    report.targets = targetsOf(report);
    log(`\n${formatReport(report)}`);
    return report;
  } finally {
    for (const app of apps) await app.stop();
    for (const t of tables)
      await pg.query(`DROP TABLE IF EXISTS ${t}, ${t}_meta`).catch(() => undefined);
    await pg.end();
    await deleteKeys(redis, prefix).catch(() => undefined);
    await redis.quit();
  }
}

type Report = Awaited<ReturnType<typeof runShortenerBench>>;

function targetsOf({ redirect, stress, lifetime, hitPath, options: o }: Report): Target[] {
  const targets: Target[] = [];
  const cachedHit = hitPath?.rows.find((r) => r.name === HIT_PATH_TARGET_ROW);
  if (hitPath && cachedHit)
    targets.push({
      name: `${HIT_PATH_TARGET_ROW} >= ${HIT_PATH_TARGET * 100} % of ${hitPath.reference} at ${hitPath.connections} connections`,
      met: cachedHit.ratio >= HIT_PATH_TARGET,
      detail: hitPath.rows
        .map((r) => `${r.name} ${Math.round(r.rps)} req/s = ${Math.round(r.ratio * 100)} %`)
        .join(', '),
    });
  if (redirect.length > 0) {
    const top = Math.max(...o.connections.map(Number));
    const at = (mode: string) => redirect.find((r) => r.mode === mode && r.connections === top);
    const [dbOnly, cached] = [at('db-only'), at('cached')];
    const ratio = dbOnly && cached ? cached.rps / dbOnly.rps : NaN;
    const trouble = stress.map(
      (r) => `${r.mode}: ${r.errors} errors, ${r.timeouts} timeouts, ${r.unexpected} non-302`,
    );
    targets.push(
      {
        name: `cached >= 2x DB-only redirect throughput at ${top} connections`,
        met: ratio >= 2,
        detail: `${Math.round(cached?.rps ?? NaN)} vs ${Math.round(dbOnly?.rps ?? NaN)} req/s = ${ratio.toFixed(2)}x`,
      },
      {
        name: `no errors at ${o['stress-connections']} connections`,
        met: stress.every((r) => r.errors === 0 && r.timeouts === 0 && r.unexpected === 0),
        detail: `${trouble.join('; ')}${stress.some((r) => r.mode === 'cached') ? '' : ' (no cached run)'}`,
      },
    );
  }
  if (lifetime) {
    const cachedRows = redirect.filter((r) => r.mode === 'cached');
    const cachedLookups = cachedRows.reduce((s, r) => s + r.dbLookups, 0);
    const cacheErrors = cachedRows.reduce((s, r) => s + r.storeErrors, 0) + lifetime.storeErrors;
    targets.push({
      name: 'one DB lookup per hot code per cache lifetime',
      met: cachedLookups === 0 && lifetime.dbLookups <= lifetime.bound,
      detail:
        (cachedRows.length > 0
          ? `CACHE_TTL 10m: ${cachedLookups} lookups in the measured cached runs (the ${o['hot-codes']} codes loaded once in the warm-up); `
          : '') +
        `CACHE_TTL ${lifetime.ttlS}s over ${lifetime.durationS}s: ${lifetime.dbLookups} lookups for ${o['hot-codes']} codes ` +
        `(at most ${lifetime.bound} allowed) of ${lifetime.requests} redirects` +
        (cacheErrors
          ? `; ${cacheErrors} cache operations failed or timed out (REDIS_OPERATION_TIMEOUT) and were answered from the database`
          : ''),
    });
  }
  return targets;
}

const LATENCIES = 'p50 ms=p50:2, p95 ms=p95:2, p99 ms=p99:2';
const computed = {
  'req/s': (r: LoadResult) => Math.round(r.rps),
  'creates/s': (r: LoadResult) => Math.round(r.rps),
  created: (r: LoadResult) => r.requests - r.unexpected,
  errors: (r: LoadResult) => r.errors + r.timeouts,
};

function formatReport(report: Report): string {
  const o = report.options;
  const rows: RedirectRow[] = [...report.redirect, ...report.stress];
  if (report.lifetime)
    rows.push({ ...report.lifetime, mode: `cached, TTL ${report.lifetime.ttlS}s` });
  const redirectColumns = `mode, conns=connections, req/s, ${LATENCIES}, max ms=max:2, requests, DB lookups=dbLookups, cache errors=storeErrors, non-302=unexpected, errors, load=loadAvg:1`;
  const createColumns = `strategy, conns=connections, creates/s, ${LATENCIES}, created, non-201=unexpected, errors`;
  const parts: string[] = [];
  if (report.hitPath) parts.push(formatHitPath(report.hitPath), '');
  if (rows.length > 0)
    parts.push(
      `Redirects (GET /:code -> 302), ${o['hot-codes']} hot codes, ${o.duration}s per row, PostgreSQL pool ${o.pool}:`,
      renderTable(columns<RedirectRow>(redirectColumns, computed), rows),
      '',
    );
  if (report.create.length > 0)
    parts.push(
      `Creation (POST /urls, a new URL per request), ${o['create-duration']}s per row:`,
      renderTable(columns<CreateRow>(createColumns, computed), report.create),
      '',
    );
  parts.push(
    'Targets:',
    ...report.targets.map((t) => `  [${t.met ? 'met' : 'NOT met'}] ${t.name}: ${t.detail}`),
  );
  return parts.join('\n');
}

async function main(): Promise<void> {
  const o = cliOptions(
    'npm run bench:shortener',
    'Redirects, their lifetime and code creation of the demo shortener; the hit path.',
    SPEC,
    process.argv.slice(2),
    (v) => {
      if (v.connections.map(Number).some((n) => !Number.isInteger(n) || n <= 0))
        throw new UsageError('--connections needs positive integers, comma-separated');
      const unavailable = v.perf !== undefined && perfUnavailable();
      if (unavailable) throw new UsageError(`--perf: ${unavailable}`);
    },
  );
  const redisUrl = process.env.REDIS_URL;
  if (!redisUrl)
    throw new Error(
      'REDIS_URL is not set: run it as `npm run bench:shortener` (scripts/with-redis.js sets it)',
    );
  const log = (line: string) => process.stdout.write(`${line}\n`);
  const report = await runShortenerBench({ ...o, redisUrl, log });
  if (o.json) {
    writeFileSync(o.json, `${JSON.stringify(report, null, 2)}\n`);
    process.stdout.write(`\nraw numbers written to ${o.json}\n`);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
