/*
 * A forked consumer of `--rebalance` (config in BENCH_REBALANCE_CONSUMER): ordered partitions, a
 * per-message handler. Reports what it handled every 100 ms and its partition events as they
 * happen; on { stop } it closes the app (a graceful leave) and exits.
 */
import 'reflect-metadata';
import { Controller, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Payload } from '@nestjs/microservices';
import { ServerRedisStreams, StreamEventPattern } from '@nest-redis-resilience/stream-batch-ack';

type Config = Record<'redisUrl' | 'stream' | 'consumer', string> &
  Record<'partitions' | 'leaseMs', number>;
export type KeyedTick = { key: string; seq: number; sentAt: number };

/** [key, seq, sentAt, handledAt] */
export type HandledRow = [string, number, number, number];

export type RebalanceChildMessage =
  | { type: 'joining'; at: number }
  | { type: 'ready' }
  | { type: 'handled'; rows: HandledRow[] }
  | { type: 'partition'; event: 'assigned' | 'released' | 'lost'; partition: number; at: number }
  | { type: 'closed' };

const cfg = JSON.parse(process.env.BENCH_REBALANCE_CONSUMER ?? '{}') as Config;
const send = (msg: RebalanceChildMessage) => process.send?.(msg);
let rows: HandledRow[] = [];

@Controller()
class TicksController {
  @StreamEventPattern(cfg.stream)
  onTick(@Payload() tick: KeyedTick): void {
    rows.push([tick.key, tick.seq, tick.sentAt, Date.now()]);
  }
}

@Module({ controllers: [TicksController] })
class RebalanceConsumerModule {}

async function main(): Promise<void> {
  const server = new ServerRedisStreams({
    connection: cfg.redisUrl,
    group: 'bench',
    consumer: cfg.consumer,
    partitions: { [cfg.stream]: cfg.partitions },
    ordering: 'key',
    leaseMs: cfg.leaseMs,
    read: { count: 200, blockMs: 100 },
  });
  for (const event of ['assigned', 'released', 'lost'] as const)
    server.events.on(`redis_streams.partition.${event}`, (e) =>
      send({ type: 'partition', event, partition: e.partition, at: Date.now() }),
    );
  const app = await NestFactory.createMicroservice(RebalanceConsumerModule, {
    strategy: server,
    logger: ['error'],
  });
  // Joining the group: from here the others hand partitions over (listen() returns once this
  // consumer took the free ones).
  send({ type: 'joining', at: Date.now() });
  await app.listen();
  const flush = () => {
    if (rows.length === 0) return;
    send({ type: 'handled', rows });
    rows = [];
  };
  const timer = setInterval(flush, 100);
  send({ type: 'ready' });
  process.on('message', (msg: { type: string }) => {
    if (msg.type !== 'stop') return;
    void app.close().then(() => {
      clearInterval(timer);
      flush();
      send({ type: 'closed' });
      process.disconnect?.();
    });
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
