/*
 * Two configurations and two feature namespaces in one app:  npm run example:stampede-named
 * (uses REDIS_URL, or 127.0.0.1:6379, or starts a throwaway redis-server; the `sessions`
 * configuration uses database 1 of that Redis, or SESSIONS_REDIS_URL)
 */
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { HealthCheckService, TerminusModule } from '@nestjs/terminus';
import {
  Cacheable,
  InjectStampede,
  StampedeModule,
  StampedeNamespace,
  StampedeService,
} from '@nest-redis-resilience/stampede';
import {
  StampedeHealthIndicator,
  StampedeHealthModule,
} from '@nest-redis-resilience/stampede/health';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const SESSIONS_REDIS_URL =
  process.env.SESSIONS_REDIS_URL ?? Object.assign(new URL(REDIS_URL), { pathname: '/1' }).href;

let queries = 0;
const db = {
  async product(id: number) {
    queries++;
    return { id, name: `product ${id}` };
  },
  async session(token: string) {
    queries++;
    return { token, user: 'ada' };
  },
};

@Injectable()
export class CatalogService {
  // The default configuration: no `stampede` option.
  @Cacheable({ key: (id: number) => `product:${id}` })
  async product(id: number) {
    return db.product(id);
  }

  // The `sessions` configuration: its Redis, its prefix, its defaultTtl (15 minutes).
  @Cacheable({ stampede: 'sessions', key: (token: string) => `session:${token}` })
  async session(token: string) {
    return db.session(token);
  }
}

@Injectable()
export class SessionAdmin {
  constructor(@InjectStampede('sessions') private readonly sessions: StampedeService) {}

  logout(token: string): Promise<void> {
    return this.sessions.invalidate(`session:${token}`);
  }
}

// A feature module whose keys and tags live under `billing:` in the default configuration.
@Injectable()
export class InvoiceService {
  constructor(
    @InjectStampede({ namespace: 'billing' }) private readonly cache: StampedeNamespace,
  ) {}

  total(customer: string): Promise<number> {
    return this.cache.getOrLoad(`customer:${customer}`, async () => 42, { tags: ['customers'] });
  }

  customersChanged(): Promise<void> {
    return this.cache.invalidateTags(['customers']); // billing's `customers` tag only
  }
}

@Module({
  imports: [StampedeModule.forFeature({ namespace: 'billing' })],
  providers: [InvoiceService],
  exports: [InvoiceService],
})
export class BillingModule {}

@Module({
  imports: [
    StampedeModule.forRoot({ redis: REDIS_URL, keyPrefix: 'example:', defaultTtl: '1m' }),
    StampedeModule.forRoot({
      name: 'sessions',
      redis: SESSIONS_REDIS_URL,
      keyPrefix: 'example-sessions:',
      defaultTtl: '15m',
    }),
    BillingModule,
    TerminusModule,
    StampedeHealthModule, // optional: needs @nestjs/terminus
  ],
  providers: [CatalogService, SessionAdmin],
})
class AppModule {}

async function main() {
  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['warn', 'error'] });
  const catalog = app.get(CatalogService);
  const invoices = app.get(InvoiceService);
  const admin = app.get(SessionAdmin);
  const stampede = app.get(StampedeService); // the default configuration
  await stampede.invalidate('product:1');
  await admin.logout('t1'); // start cold

  await catalog.product(1);
  await catalog.product(1);
  await catalog.session('t1');
  await catalog.session('t1');
  console.log(`product and session, twice each -> ${queries} database queries`);

  await admin.logout('t1');
  await catalog.session('t1');
  console.log(`after logout -> ${queries} database queries`);

  console.log(`billing total -> ${await invoices.total('c1')}`);
  await invoices.customersChanged();

  const health = await app.get(HealthCheckService).check(app.get(StampedeHealthIndicator).checks());
  console.log('health entries:', Object.keys(health.details).join(', '));

  await stampede.invalidate('product:1');
  await stampede.invalidate('billing:customer:c1'); // a namespace's key, from its configuration
  await admin.logout('t1');
  await app.close();
}

void main();
