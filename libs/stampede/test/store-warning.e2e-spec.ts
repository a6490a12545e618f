import { Injectable, LoggerService } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { Cacheable, StampedeModule, StampedeService } from '@nest-redis-resilience/stampede';
import { ThrowawayRedis } from './support/redis';

@Injectable()
class UserService {
  loads = 0;

  @Cacheable({ key: (id: number) => `user:${id}`, ttl: 60_000 })
  async find(id: number): Promise<{ id: number }> {
    this.loads++;
    return { id };
  }
}

/** Keeps the warnings the app logs. */
class RecordingLogger implements LoggerService {
  readonly warnings: string[] = [];
  log(): void {}
  error(): void {}
  warn(message: unknown): void {
    this.warnings.push(String(message));
  }
}

/** The "store unavailable" warning says how the call was answered. */
describe('the store warning (a redis-server of this test)', () => {
  jest.setTimeout(30_000);
  let server: ThrowawayRedis;
  const apps: TestingModule[] = [];
  // Nest's Logger is process-wide: both apps log here.
  const logger = new RecordingLogger();
  const storeWarnings = () => logger.warnings.filter((w) => w.includes('store unavailable'));

  const start = async () => {
    const app = await Test.createTestingModule({
      imports: [StampedeModule.forRoot({ redis: server.url, keyPrefix: 'warn:' })],
      providers: [UserService],
    })
      .setLogger(logger)
      .compile();
    apps.push(await app.init());
    return { users: app.get(UserService), stampede: app.get(StampedeService) };
  };

  beforeAll(async () => {
    server = await ThrowawayRedis.start();
  });

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    await server?.destroy();
  });

  it('a call answered with a value held here says so, and one answered by the loader says that', async () => {
    const held = await start();
    const fresh = await start(); // its own warning, not held back by the other's
    await held.users.find(1);
    await server.stop();

    expect(await held.users.find(1)).toEqual({ id: 1 });
    expect(held.users.loads).toBe(1); // no loader ran
    expect(storeWarnings()).toHaveLength(1);
    expect(storeWarnings()[0]).toContain('UserService.find answered with a value held here');
    expect(storeWarnings()[0]).not.toContain('loader');

    expect(await fresh.users.find(1)).toEqual({ id: 1 });
    expect(fresh.users.loads).toBe(1);
    expect(storeWarnings()).toHaveLength(2);
    expect(storeWarnings()[1]).toContain('UserService.find answered by its loader');
    await server.start();
  });
});
