import { Test } from '@nestjs/testing';
import { RedisStreamsServerModule } from '../nest/redis-streams-server.module';
import { ServerRedisStreams } from '../transport/server-redis-streams';
import { RedisStreamsHealthModule } from './redis-streams-health.module';
import { RedisStreamsHealthIndicator } from './redis-streams.health';

// Nothing here connects: these are the answers given before any Redis command.
const connection = 'redis://127.0.0.1:1';

describe('RedisStreamsHealthIndicator, short form (the server of the app)', () => {
  it('no ServerRedisStreams in the app: down, saying how to provide one', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisStreamsHealthModule],
    }).compile();
    const result = await moduleRef.get(RedisStreamsHealthIndicator).isHealthy('streams');
    expect(result.streams.status).toBe('down');
    expect(result.streams.message).toContain('No ServerRedisStreams in this app');
    expect(result.streams.message).toContain('RedisStreamsServerModule.forRoot()');
    await moduleRef.close();
  });

  it("the module's server, not started: down, with its group and the reason", async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        RedisStreamsServerModule.forRoot({ connection, group: 'billing', isGlobal: false }),
        RedisStreamsHealthModule,
      ],
    }).compile();
    const result = await moduleRef.get(RedisStreamsHealthIndicator).isHealthy('streams');
    expect(result.streams).toMatchObject({ status: 'down', group: 'billing' });
    expect(result.streams.message).toContain('ServerRedisStreams is not initialized');
    await moduleRef.close();
  });

  it("{ server } checks that server instead of the app's", async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisStreamsHealthModule],
    }).compile();
    const server = new ServerRedisStreams({ connection, group: 'reports' });
    const result = await moduleRef
      .get(RedisStreamsHealthIndicator)
      .isHealthy('reports', { server, maxLag: 10 });
    expect(result.reports).toMatchObject({ status: 'down', group: 'reports' });
    await moduleRef.close();
  });
});

describe('RedisStreamsHealthIndicator, explicit form', () => {
  it('client, stream and group go together: a partial call is down, saying so', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisStreamsHealthModule],
    }).compile();
    const server = new ServerRedisStreams({ connection, group: 'g' });
    const result = await moduleRef
      .get(RedisStreamsHealthIndicator)
      .isHealthy('x', { client: server } as never);
    expect(result.x.status).toBe('down');
    expect(result.x.message).toContain('Give client, stream and group together');
    await moduleRef.close();
  });

  it('the server as client, not started: down, as before', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisStreamsHealthModule],
    }).compile();
    const server = new ServerRedisStreams({ connection, group: 'g' });
    const result = await moduleRef
      .get(RedisStreamsHealthIndicator)
      .isHealthy('ticks', { client: server, stream: 'ticks', group: 'g' });
    expect(result.ticks).toMatchObject({ status: 'down', stream: 'ticks', group: 'g' });
    expect(result.ticks.message).toContain('ServerRedisStreams is not initialized');
    await moduleRef.close();
  });
});
