/*
 * One "instance" of an app for the cross-process tests: a Nest application context with its
 * own Redis connection. The parent sends { id, method, key, concurrency, loaderMs } over IPC;
 * the worker makes that many concurrent calls and answers { id, values, ms } or { id, error }.
 * Loader calls are counted in Redis (INCR), so the parent can count them across processes.
 */
import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Module } from '@nestjs/common';
import { Redis } from 'ioredis';
import { Cacheable, DistLock, SingleFlight, StampedeModule } from '@nest-redis-resilience/stampede';

const REDIS_URL = process.env.REDIS_URL!;
const PREFIX = process.env.STAMPEDE_PREFIX!;
const LOCK_TTL = Number(process.env.LOCK_TTL ?? 5000);

const counter = new Redis(REDIS_URL);
let loaderMs = 100;

async function load(key: string): Promise<string> {
  await counter.incr(`${PREFIX}loads:${key}`);
  await new Promise((r) => setTimeout(r, loaderMs));
  return `value-of-${key}-by-${process.pid}`;
}

@Injectable()
class Loaders {
  @Cacheable({ key: (k: string) => `locked:${k}`, ttl: 60_000 })
  @SingleFlight()
  @DistLock({ ttl: LOCK_TTL, poll: 2 })
  locked(key: string): Promise<string> {
    return load(`locked:${key}`);
  }

  @Cacheable({ key: (k: string) => `unlocked:${k}`, ttl: 60_000 })
  @SingleFlight()
  unlocked(key: string): Promise<string> {
    return load(`unlocked:${key}`);
  }
}

@Module({
  imports: [StampedeModule.forRoot({ redis: REDIS_URL, keyPrefix: PREFIX })],
  providers: [Loaders],
})
class WorkerModule {}

interface Command {
  id: number;
  method: 'locked' | 'unlocked';
  key: string;
  concurrency: number;
  loaderMs: number;
}

async function main() {
  const app = await NestFactory.createApplicationContext(WorkerModule, { logger: false });
  const loaders = app.get(Loaders);
  process.on('message', async (msg: Command | 'exit') => {
    if (msg === 'exit') {
      await app.close();
      await counter.quit();
      process.exit(0);
    }
    loaderMs = msg.loaderMs;
    const started = Date.now();
    try {
      const values = await Promise.all(
        Array.from({ length: msg.concurrency }, () => loaders[msg.method](msg.key)),
      );
      process.send!({ id: msg.id, values, ms: Date.now() - started });
    } catch (err) {
      process.send!({ id: msg.id, error: String(err) });
    }
  });
  process.send!({ ready: true });
}

void main();
