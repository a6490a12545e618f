/**
 * Peak RSS of a process serving the Zipf hot set: each variant runs in a fresh forked
 * instance for each duration, so one variant's garbage does not count against another's.
 *
 *   node scripts/with-redis.js node -r ./scripts/register-ts.js bench/stampede/rss.ts \
 *     [--durations 20000,60000] [--variants two-tier-xfetch,two-tier-xfetch+l1,bento-like]
 *     [--keys 10000] [--rate 5000] [--ttl 2000] [--backend 10]
 *
 * A variant is a bench pattern, `+l1` giving its StampedeModule `l1: true`. Redis is a private
 * redis-server of the run. Prints one row per variant and duration: requests served, peak RSS
 * of the instance (process.resourceUsage().maxRSS) and its ratio to the last variant's
 * (`bento-like`, a plain L1 + L2 cache-aside without the library, by default).
 */
import { parseArgs } from 'node:util';
import { renderTable } from '../shared/table';
import { columns } from '../shared/columns';
import { PrivateRedis } from '../shared/private-redis';
import { ForkedInstance } from './instances';
import { poissonJob } from './load';
import { parseVariant } from './options';

const { values } = parseArgs({
  options: {
    durations: { type: 'string', default: '20000,60000' },
    variants: { type: 'string', default: 'two-tier-xfetch,two-tier-xfetch+l1,bento-like' },
    keys: { type: 'string', default: '10000' },
    rate: { type: 'string', default: '5000' },
    ttl: { type: 'string', default: '2000' },
    backend: { type: 'string', default: '10' },
  },
});

async function main(): Promise<void> {
  const variants = values.variants.split(',');
  const redis = await PrivateRedis.start();
  const rows: {
    variant: string;
    duration_s: number;
    reqs: number;
    peak_rss_mb: number;
    ratio: number;
  }[] = [];
  console.log(
    `## rss: ${redis.describe()}; ${values.keys} keys, Zipf s=1, Poisson ${values.rate} req/s in one forked instance, ` +
      `TTL ${values.ttl} ms, backend ${values.backend} ms; a fresh instance per variant and duration`,
  );
  try {
    for (const duration of values.durations.split(',').map(Number)) {
      for (const name of variants) {
        const { pattern, l1 } = parseVariant(name);
        const prefix = `rss:${duration}:${name}:`;
        const instance = await ForkedInstance.start({
          redisUrl: redis.url,
          prefix,
          ttlMs: Number(values.ttl),
          backendMs: Number(values.backend),
          lockTtlMs: 5000,
          pollMs: 2,
          beta: 1,
          jitter: 0.1,
          moduleOptions: l1 ? { l1: true } : undefined,
        });
        try {
          const result = await instance.load(
            poissonJob(pattern, prefix, Number(values.keys), Number(values.rate), duration, 1),
          );
          const peak = result.maxRssKb / 1024;
          rows.push({
            variant: name,
            duration_s: duration / 1000,
            reqs: result.reqs,
            peak_rss_mb: peak,
            ratio: NaN,
          });
        } finally {
          await instance.close();
        }
      }
      const these = rows.slice(-variants.length);
      for (const r of these) r.ratio = r.peak_rss_mb / these[these.length - 1].peak_rss_mb;
    }
  } finally {
    await redis.stop();
  }
  const ref = `x ${variants[variants.length - 1]}`;
  console.log(
    renderTable(columns(`variant, duration_s, reqs, peak_rss_mb:1, ${ref}=ratio:2`), rows),
  );
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
