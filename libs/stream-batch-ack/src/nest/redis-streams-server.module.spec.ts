import { Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { StreamBatchAckConfigError } from '../core/errors';
import { ServerRedisStreams } from '../transport/server-redis-streams';
import { RedisStreamsServerModule } from './redis-streams-server.module';

// Nothing here connects: a server connects in listen(), which no test calls.
const connection = 'redis://127.0.0.1:1';

@Injectable()
class UsesServer {
  constructor(readonly server: ServerRedisStreams) {}
}

@Module({ providers: [UsesServer], exports: [UsesServer] })
class ElsewhereModule {}

describe('RedisStreamsServerModule', () => {
  it('forRoot: provides a ServerRedisStreams built from the options, global by default', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        RedisStreamsServerModule.forRoot({ connection, group: 'billing', consumer: 'c1' }),
        ElsewhereModule,
      ],
    }).compile();
    const server = moduleRef.get(ServerRedisStreams);
    expect(server).toBeInstanceOf(ServerRedisStreams);
    expect(server.options).toMatchObject({ connection, group: 'billing', consumer: 'c1' });
    // global: a module that does not import it gets the same instance
    expect(moduleRef.get(UsesServer).server).toBe(server);
    await moduleRef.close(); // closes the never-started server: nothing to do, nothing thrown
  });

  it('isGlobal: false keeps it to the importing module', () => {
    expect(RedisStreamsServerModule.forRoot({ connection, group: 'g' }).global).toBe(true);
    expect(
      RedisStreamsServerModule.forRoot({ connection, group: 'g', isGlobal: false }).global,
    ).toBe(false);
    expect(
      RedisStreamsServerModule.forRootAsync({
        isGlobal: false,
        useFactory: () => ({ connection, group: 'g' }),
      }).global,
    ).toBe(false);
  });

  it('forRoot: an invalid option throws where the module is declared, naming it', () => {
    expect(() =>
      RedisStreamsServerModule.forRoot({
        connection,
        group: 'g',
        ...({ deadletter: { maxDeliveries: 3 } } as object),
      }),
    ).toThrow(
      new StreamBatchAckConfigError(
        'deadletter',
        'ServerRedisStreams has no such option. Did you mean "deadLetter"?',
      ),
    );
    expect(() => RedisStreamsServerModule.forRoot({ connection: 'http://x', group: 'g' })).toThrow(
      'Invalid option "connection": expected a redis:// or rediss:// URL, got "http://x".',
    );
  });

  it('forRootAsync: the factory may be async and inject providers; its options are checked when the app starts', async () => {
    @Module({ providers: [{ provide: 'GROUP', useValue: 'from-di' }], exports: ['GROUP'] })
    class SettingsModule {}

    const moduleRef = await Test.createTestingModule({
      imports: [
        RedisStreamsServerModule.forRootAsync({
          imports: [SettingsModule],
          inject: ['GROUP'],
          useFactory: async (group: string) => ({ connection, group }),
        }),
      ],
    }).compile();
    expect(moduleRef.get(ServerRedisStreams).options.group).toBe('from-di');
    await moduleRef.close();

    await expect(
      Test.createTestingModule({
        imports: [
          RedisStreamsServerModule.forRootAsync({
            useFactory: () => ({ connection, group: 'g', read: { cout: 10 } }) as never,
          }),
        ],
      }).compile(),
    ).rejects.toThrow(
      'Invalid option "read.cout": ServerRedisStreams has no such option. Did you mean "read.count"?',
    );
  });

  it.each<[string, unknown, string]>([
    ['undefined', undefined, 'undefined'],
    ['null', null, 'null'],
    ['a string', 'redis://127.0.0.1:1', 'a string'],
    ['an array', [], 'an array'],
  ])(
    'forRootAsync: a factory that returns %s is refused, saying what it needs',
    async (_, value, shown) => {
      await expect(
        Test.createTestingModule({
          imports: [RedisStreamsServerModule.forRootAsync({ useFactory: () => value as never })],
        }).compile(),
      ).rejects.toThrow(
        `Invalid option "options": RedisStreamsServerModule needs the ServerRedisStreams options ({ connection, group, ... }); forRootAsync's factory returned ${shown}.`,
      );
    },
  );
});
