import type { Logger } from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import { backoffDelay } from '../core/backoff';
import { describeError } from '../core/errors';
import type { FlowGate } from '../core/flow-gate';

/** An entry as Redis returns it: `[id, [field, value, ...]]` (fields are nil for an entry deleted while pending). */
export type RawEntry = [id: string, fields: string[] | null];

export interface StreamReaderOptions {
  group: string;
  consumer: string;
  count: number;
  blockMs: number;
  /**
   * Which of its streams to read now (default: all). Partitions whose order is kept are read only
   * while this consumer owns them.
   */
  readable?: (stream: string) => boolean;
}

/**
 * The read loop of one blocking connection: `XREADGROUP ... BLOCK` over its streams, as much as the
 * gate has room for, each reply handed on per stream. Disconnecting the connection ends the loop.
 */
export class StreamReader {
  /** The XREADGROUP call under way, if any. */
  private reading: Promise<unknown> | null = null;
  /** Which stream comes first when the room is smaller than the number of streams. */
  private turn = 0;

  constructor(
    private readonly client: Redis | Cluster,
    private readonly streams: readonly string[],
    private readonly options: StreamReaderOptions,
    private readonly gate: FlowGate,
    private readonly deliver: (stream: string, entries: RawEntry[]) => void,
    /** After NOGROUP: creates the missing groups of these streams again (and says so). */
    private readonly recreateGroups: () => Promise<void>,
    private readonly logger: Logger,
  ) {}

  async run(): Promise<void> {
    const { group, consumer, readable } = this.options;
    const all = this.streams;
    const allIds = all.map(() => '>');
    let failures = 0;
    while (!this.gate.isClosed) {
      const room = this.gate.room();
      if (room === 0) {
        await this.gate.wait(100);
        continue;
      }
      let streams = readable ? all.filter(readable) : all;
      if (streams.length === 0) {
        await this.gate.wait(Math.min(100, this.options.blockMs), false);
        continue;
      }
      // COUNT applies to each stream: the room is shared out so that no reply takes more than it.
      let count = Math.min(this.options.count, Math.floor(room / streams.length));
      if (count === 0) {
        // Fewer free slots than streams: one entry from each of `room` streams, taking turns.
        const start = this.turn++ % streams.length;
        streams = [...streams.slice(start), ...streams.slice(0, start)].slice(0, room);
        count = 1;
      }
      const ids = streams === all ? allIds : streams.map(() => '>');
      let reply: [string, RawEntry[]][] | null;
      try {
        this.reading = this.client.call(
          'XREADGROUP',
          'GROUP',
          group,
          consumer,
          'COUNT',
          count,
          'BLOCK',
          this.options.blockMs,
          'STREAMS',
          ...streams,
          ...ids,
        );
        reply = (await this.reading) as [string, RawEntry[]][] | null;
        failures = 0;
      } catch (err) {
        this.reading = null;
        if (this.gate.isClosed) break;
        failures++;
        const message = describeError(err);
        if (message.startsWith('NOGROUP')) {
          await this.recreateGroups().catch((e) =>
            this.logger.error(
              `Consumer group "${group}" is missing and could not be created again: ${describeError(e)}`,
            ),
          );
        } else {
          this.logger.error(`XREADGROUP failed: ${message}`);
        }
        await this.gate.wait(backoffDelay(failures, { initialMs: 100, maxMs: 5000 }), false);
        continue;
      }
      this.reading = null;
      if (!reply) continue;
      for (const [stream, entries] of reply) if (entries.length > 0) this.deliver(stream, entries);
    }
  }

  /** Resolves once the XREADGROUP call under way (if any) has returned and its entries were handed on. */
  async settled(): Promise<void> {
    const reading = this.reading;
    if (reading) await reading.catch(() => undefined);
    // Its reply is handed on synchronously after the await in run(), which ran first.
    await Promise.resolve();
  }

  stop(): void {
    this.client.disconnect();
  }
}
