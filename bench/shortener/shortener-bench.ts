import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { Redis } from 'ioredis';
import { Client } from 'pg';
import { collectEnvInfo, EnvInfo, formatEnvInfo } from '../shared/env-info';
import { renderTable } from '../shared/table';
import { ShortenerProcess } from './app-process';
import { LoadResult, runLoad } from './load';

export type Strategy = 'sequence' | 'hash' | 'snowflake';

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
  lifetime: RedirectRow & { ttlS: number; bound: number };
  create: CreateRow[];
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
  const start = async (env: Record<string, string>) => {
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
      opts.built,
    );
    apps.push(app);
    return app;
  };
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
    const codes: string[] = [];
    const paths = () => codes.map((c) => `/${c}`);

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

    for (const mode of ['db-only', 'cached'] as const) {
      log(`redirects, ${mode}:`);
      const app = await start({ CACHE_ENABLED: String(mode === 'cached'), CACHE_TTL: '10m' });
      if (codes.length === 0) {
        for (let i = 0; i < opts.hotCodes; i++) {
          const res = await fetch(`${app.baseUrl}/urls`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ url: `https://example.com/hot/${id}/${i}` }),
          });
          codes.push(((await res.json()) as { code: string }).code);
        }
      }
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

    log(`one lookup per hot code per cache lifetime (CACHE_TTL ${opts.lifetimeTtlS}s):`);
    await redis.eval(
      "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end",
      0,
      `${prefix}*`,
    );
    const lifeApp = await start({ CACHE_TTL: `${opts.lifetimeTtlS}s` });
    const lifeRow = await redirectRun(lifeApp, 'cached', 100, opts.lifetimeDurationS);
    await stop(lifeApp);
    // Jitter makes lifetimes 0.9..1.1 x TTL: at most one load per code at the start and one per
    // shortest lifetime after it.
    const bound = opts.hotCodes * (1 + Math.floor(lifeRow.durationS / (0.9 * opts.lifetimeTtlS)));
    const lifetime = { ...lifeRow, ttlS: opts.lifetimeTtlS, bound };

    const create: CreateRow[] = [];
    log('creation:');
    for (const strategy of opts.strategies) {
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
      targets: targetsOf(redirect, stress, lifetime, opts),
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
  opts: ShortenerBenchOptions,
): Target[] {
  const top = Math.max(...opts.connections);
  const dbOnly = redirect.find((r) => r.mode === 'db-only' && r.connections === top);
  const cached = redirect.find((r) => r.mode === 'cached' && r.connections === top);
  const ratio = dbOnly && cached ? cached.rps / dbOnly.rps : NaN;
  const cachedRows = redirect.filter((r) => r.mode === 'cached');
  const cachedLookups = cachedRows.reduce((s, r) => s + r.dbLookups, 0);
  const cacheErrors = cachedRows.reduce((s, r) => s + r.storeErrors, 0) + lifetime.storeErrors;
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
      name: 'one DB lookup per hot code per cache lifetime',
      met: cachedLookups === 0 && lifetime.dbLookups <= lifetime.bound,
      detail:
        `CACHE_TTL 10m: ${cachedLookups} lookups in the measured cached runs (the ${opts.hotCodes} codes loaded once in the warm-up); ` +
        `CACHE_TTL ${lifetime.ttlS}s over ${lifetime.durationS}s: ${lifetime.dbLookups} lookups for ${opts.hotCodes} codes ` +
        `(at most ${lifetime.bound} allowed) of ${lifetime.requests} redirects` +
        (cacheErrors
          ? `; ${cacheErrors} cache operations failed or timed out (REDIS_OPERATION_TIMEOUT) and were answered from the database`
          : ''),
    },
    {
      name: `no errors at ${opts.stressConnections} connections`,
      met: stress.every((r) => r.errors === 0 && r.timeouts === 0 && r.unexpected === 0),
      detail: `${stressTrouble.join('; ')}${cachedStress ? '' : ' (no cached run)'}`,
    },
  ];
}

export function formatReport(report: ShortenerBenchReport): string {
  const rows = [
    ...report.redirect,
    ...report.stress,
    { ...report.lifetime, mode: `cached, TTL ${report.lifetime.ttlS}s` },
  ];
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
  return [
    `Redirects (GET /:code -> 302), ${report.options.hotCodes} hot codes, ${report.options.durationS}s per row, PostgreSQL pool ${report.options.pool}:`,
    redirectTable,
    '',
    `Creation (POST /urls, a new URL per request), ${report.options.createDurationS}s per row:`,
    createTable,
    '',
    'Targets:',
    targets,
  ].join('\n');
}
