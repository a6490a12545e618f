import { NestFastifyApplication } from '@nestjs/platform-fastify';
import { isValidCode } from '../src/codes/base62';
import { hashCode, urlHash } from '../src/codes/code-strategy';
import { CODE_STRATEGIES, CodeStrategyName } from '../src/config';
import { ShortenerService } from '../src/urls/shortener.service';
import { POSTGRES_URL, repositoryOf, requirePostgres, runId, startApp } from './support/env';

const COUNT = 10_000;

/**
 * Each code strategy, through the service and a real database: distinct, storable codes.
 * The 10,000-code runs use an in-memory SQLite database (same engine and SQL, no file writes).
 */
describe('shortener: code strategies', () => {
  const id = runId('codes');
  const apps: NestFastifyApplication[] = [];

  afterAll(async () => {
    for (const app of apps) {
      await repositoryOf(app).dropTable();
      await app.close();
    }
  });

  async function appFor(strategy: CodeStrategyName, databaseUrl = 'sqlite::memory:') {
    const app = await startApp({
      DATABASE_URL: databaseUrl,
      DATABASE_TABLE: `codes_${strategy}_${id}`,
      CODE_STRATEGY: strategy,
      CACHE_ENABLED: 'false',
    });
    apps.push(app);
    return { service: app.get(ShortenerService), repo: repositoryOf(app) };
  }

  it.each(CODE_STRATEGIES)(
    `%s: ${COUNT.toLocaleString('en')} URLs get ${COUNT.toLocaleString('en')} distinct Base62 codes, each stored with its URL`,
    async (strategy) => {
      const { service, repo } = await appFor(strategy);
      const codes = new Map<string, string>();
      for (let i = 0; i < COUNT; i++) {
        const url = `https://example.com/${strategy}/${i}`;
        const { record, created } = await service.create(url);
        expect(created).toBe(true);
        codes.set(record.code, url);
      }
      expect(codes.size).toBe(COUNT);
      for (const [code, url] of codes) {
        if (!isValidCode(code)) throw new Error(`invalid code ${code}`);
        const stored = await repo.findByCode(code);
        if (stored?.url !== url) throw new Error(`${code} stored ${stored?.url}, expected ${url}`);
      }
    },
  );

  it('hash: a code taken by another URL is skipped for the next salted hash', async () => {
    const { service, repo } = await appFor('hash');
    const url = 'https://example.com/collides';
    // Someone else holds the first code this URL would get.
    await repo.insertWithCode(hashCode(url, 0), 'https://example.com/squatter', urlHash('sq'));
    const { record } = await service.create(url);
    expect(record.code).toBe(hashCode(url, 1));
    expect((await repo.findByCode(hashCode(url, 0)))?.url).toBe('https://example.com/squatter');
    expect((await repo.findByCode(record.code))?.url).toBe(url);
  });
});

describe('shortener: code strategies on PostgreSQL', () => {
  const id = runId('pgcodes');
  const apps: NestFastifyApplication[] = [];

  beforeAll(requirePostgres);

  afterAll(async () => {
    for (const app of apps) {
      await repositoryOf(app).dropTable();
      await app.close();
    }
  });

  it.each(CODE_STRATEGIES)(
    '%s: 200 URLs, 200 distinct codes; 20 concurrent posts of one URL store it once',
    async (strategy) => {
      const app = await startApp({
        DATABASE_URL: POSTGRES_URL,
        DATABASE_TABLE: `codes_${strategy}_${id}`,
        CODE_STRATEGY: strategy,
        CACHE_ENABLED: 'false',
      });
      apps.push(app);
      const service = app.get(ShortenerService);
      const created = await Promise.all(
        Array.from({ length: 200 }, (_, i) => service.create(`https://example.com/pg/${i}`)),
      );
      expect(new Set(created.map((c) => c.record.code)).size).toBe(200);
      const same = await Promise.all(
        Array.from({ length: 20 }, () => service.create('https://example.com/pg/same')),
      );
      expect(new Set(same.map((c) => c.record.code)).size).toBe(1);
      expect(same.filter((c) => c.created)).toHaveLength(1);
      const stored = await repositoryOf(app).findByCode(same[0].record.code);
      expect(stored?.url).toBe('https://example.com/pg/same');
    },
  );
});
