/*
 * Runnable tour of @nest-redis-resilience/stampede:  npm run example:stampede
 * (uses REDIS_URL, or 127.0.0.1:6379, or starts a throwaway redis-server)
 */
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  Cacheable,
  DistLock,
  JitterTtl,
  SingleFlight,
  StampedeModule,
  StampedeService,
  XFetch,
} from '@nest-redis-resilience/stampede';
import {
  StampedeHealthIndicator,
  StampedeHealthModule,
} from '@nest-redis-resilience/stampede/health';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

@Injectable()
export class ProductService {
  dbQueries = 0;

  // Cached for 30 s; 1000 concurrent callers in this process share one query;
  // across instances one query per key (DistLock); refreshed early before expiry (XFetch);
  // TTLs spread by +-10 % so keys written together do not expire together (JitterTtl).
  @Cacheable({ key: (id: number) => `product:${id}`, ttl: '30s' })
  @SingleFlight()
  @XFetch(1)
  @DistLock({ ttl: 5000, poll: 2 })
  @JitterTtl(0.1)
  async findProduct(id: number): Promise<{ id: number; name: string }> {
    this.dbQueries++;
    await sleep(100); // the slow database
    return { id, name: `product ${id}` };
  }

  // No decorator options: the key is `ProductService.countByCategory:"books"`, the TTL the module's defaultTtl.
  @Cacheable()
  async countByCategory(category: string): Promise<number> {
    this.dbQueries++;
    await sleep(50);
    return category.length;
  }
}

@Module({
  imports: [
    StampedeModule.forRoot({
      redis: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
      keyPrefix: 'example:',
      defaultTtl: '1m',
    }),
    StampedeHealthModule, // optional: needs @nestjs/terminus
  ],
  providers: [ProductService],
})
class AppModule {}

async function main() {
  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['warn', 'error'] });
  const products = app.get(ProductService);
  const stampede = app.get(StampedeService);
  await stampede.invalidate('product:42'); // start cold

  const results = await Promise.all(Array.from({ length: 1000 }, () => products.findProduct(42)));
  console.log(
    `1000 concurrent calls -> ${products.dbQueries} database query, value: ${JSON.stringify(results[999])}`,
  );

  await products.countByCategory('books');
  await products.countByCategory('books');
  console.log(`after countByCategory twice -> ${products.dbQueries} database queries`);

  // Without decorators: the same flow through StampedeService.
  const rate = await stampede.getOrLoad('fx:EURUSD', async () => 1.08, {
    ttl: '5s',
    singleFlight: true,
    lock: true,
  });
  console.log(`getOrLoad -> ${rate}`);

  console.log('metrics of findProduct:', stampede.metrics()['ProductService.findProduct']);
  console.log('health:', await app.get(StampedeHealthIndicator).isHealthy('cache'));

  await stampede.invalidate('product:42');
  await stampede.invalidate('fx:EURUSD');
  await stampede.invalidate('ProductService.countByCategory:"books"');
  await app.close();
}

void main();
