import { Inject, Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { ClientProxy } from '@nestjs/microservices';
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { lastValueFrom } from 'rxjs';
import { InjectConfig } from '../config/ticks-config.module';
import { CollectorSettings } from '../config/ticks-env.schema';
import { TICKS_CLIENT } from '../ticks.constants';
import { RandomWalk } from './random-walk';

export interface CollectorStats {
  /** Ticks whose XADD succeeded. */
  published: number;
  /** Ticks whose XADD failed (not in the stream). */
  failed: number;
  /** Sum of the qty of the published ticks that are valid numbers. */
  volume: number;
  /** Replay only: lines that are not JSON (not published). */
  skipped: number;
  startedAt: number;
  endedAt?: number;
}

/** Publishes ticks to the stream through ClientRedisStreams: synthetic ones, or a file's. */
@Injectable()
export class CollectorService implements OnModuleDestroy {
  private readonly logger = new Logger(CollectorService.name);
  private stopped = false;
  private running: Promise<CollectorStats> | null = null;
  private readonly outstanding = new Set<Promise<void>>();
  private wake: (() => void) | null = null;

  constructor(
    @Inject(TICKS_CLIENT) private readonly client: ClientProxy,
    @InjectConfig('collector') private readonly config: CollectorSettings,
  ) {}

  /** Starts publishing as configured (replay file or synthetic); resolves when it ends. */
  start(): Promise<CollectorStats> {
    if (!this.running) {
      this.stopped = false;
      this.running = this.config.replayFile
        ? this.replay(this.config.replayFile)
        : this.runSynthetic();
    }
    return this.running;
  }

  /** Stops publishing and waits for the XADDs already sent. */
  async stop(): Promise<CollectorStats | undefined> {
    this.stopped = true;
    this.wake?.();
    const stats = await this.running?.catch(() => undefined);
    this.running = null;
    return stats;
  }

  async onModuleDestroy(): Promise<void> {
    await this.stop();
  }

  private publish(tick: unknown, stats: CollectorStats): Promise<void> {
    const qty = (tick as { qty?: unknown } | null)?.qty;
    const run = lastValueFrom(this.client.emit(this.config.stream, tick), {
      defaultValue: undefined,
    }).then(
      () => {
        stats.published++;
        if (typeof qty === 'number' && Number.isFinite(qty)) stats.volume += qty;
      },
      (err) => {
        stats.failed++;
        if (stats.failed === 1 || stats.failed % 10_000 === 0)
          this.logger.warn(`XADD failed (${stats.failed} so far): ${(err as Error).message}`);
      },
    );
    const tracked = run.finally(() => this.outstanding.delete(tracked));
    this.outstanding.add(tracked);
    return tracked;
  }

  /** `symbols` x `ratePerSymbol` ticks per second, spread over 10 ms steps, for `durationMs`. */
  async runSynthetic(
    options: Partial<
      Pick<CollectorSettings, 'symbols' | 'ratePerSymbol' | 'durationMs' | 'seed'>
    > = {},
  ): Promise<CollectorStats> {
    const { symbols, ratePerSymbol, durationMs, seed } = { ...this.config, ...options };
    const walk = new RandomWalk(symbols, seed);
    const rate = symbols * ratePerSymbol;
    const stats: CollectorStats = {
      published: 0,
      failed: 0,
      volume: 0,
      skipped: 0,
      startedAt: Date.now(),
    };
    this.logger.log(
      `Publishing ${symbols} symbols x ${ratePerSymbol}/s = ${rate} ticks/s to "${this.config.stream}"${durationMs ? ` for ${durationMs} ms` : ''}`,
    );
    const started = performance.now();
    let sent = 0;
    let next = 0;
    // Every reportEveryMs (10 s), the rate reached (XADDs Redis acknowledged) beside the target.
    let last = { at: started, published: 0 };
    const report = setInterval(() => {
      const now = performance.now();
      const seconds = (now - last.at) / 1000;
      const reached = Math.round((stats.published - last.published) / seconds);
      last = { at: now, published: stats.published };
      this.logger.log(
        `reached ${reached} ticks/s over the last ${seconds.toFixed(1)} s (target ${rate}/s; ${stats.failed} failed so far)`,
      );
    }, this.config.reportEveryMs);
    report.unref();
    while (!this.stopped) {
      const elapsed = performance.now() - started;
      const limit = durationMs > 0 ? Math.min(elapsed, durationMs) : elapsed;
      // Catch up at most 1 s of ticks at once; never more than 100k XADDs awaiting replies.
      const due = Math.min(
        Math.floor((limit * rate) / 1000) - sent,
        rate,
        100_000 - this.outstanding.size,
      );
      const now = Date.now();
      for (let i = 0; i < due; i++) {
        void this.publish(walk.next(next, now), stats);
        next = (next + 1) % symbols;
      }
      if (due > 0) sent += due;
      if (durationMs > 0 && elapsed >= durationMs && sent >= Math.floor((durationMs * rate) / 1000))
        break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 10);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = null;
    }
    clearInterval(report);
    while (this.outstanding.size > 0) await Promise.allSettled([...this.outstanding]);
    stats.endedAt = Date.now();
    return stats;
  }

  /**
   * Publishes every line of a JSON-lines file, in order, as fast as Redis takes them. Lines that
   * are not JSON are skipped (and counted); other values are published as they are, valid ticks
   * or not (the consumer dead-letters invalid ones).
   */
  async replay(file: string): Promise<CollectorStats> {
    const stats: CollectorStats = {
      published: 0,
      failed: 0,
      volume: 0,
      skipped: 0,
      startedAt: Date.now(),
    };
    const lines = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
    let chunk: Promise<void>[] = [];
    let lineNo = 0;
    for await (const line of lines) {
      lineNo++;
      if (this.stopped) break;
      if (line.trim() === '') continue;
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch {
        stats.skipped++;
        this.logger.warn(`${file}:${lineNo}: not JSON, skipped`);
        continue;
      }
      chunk.push(this.publish(value, stats));
      if (chunk.length >= 1000) {
        await Promise.all(chunk);
        chunk = [];
      }
    }
    await Promise.all(chunk);
    stats.endedAt = Date.now();
    this.logger.log(
      `Replayed ${file}: ${stats.published} published, ${stats.failed} failed, ${stats.skipped} skipped`,
    );
    return stats;
  }
}
