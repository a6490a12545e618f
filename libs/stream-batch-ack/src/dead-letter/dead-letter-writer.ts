import type { Cluster, Redis } from 'ioredis';
import { DeadLetterCause, deadLetterFields } from './dead-letter-entry';
import type { StreamScripts } from '../redis/scripts';

/** Moves entries to their dead-letter stream and acknowledges them, one Lua script per entry. */
export class DeadLetterWriter {
  constructor(
    private readonly commands: (Redis | Cluster) & StreamScripts,
    private readonly options: {
      group: string;
      consumer: string;
      deadLetterStream: (stream: string) => string;
      maxLen: number;
    },
  ) {}

  async write(
    stream: string,
    id: string,
    fields: Record<string, string>,
    deliveries: number,
    reason: DeadLetterCause,
    error: unknown,
  ): Promise<string> {
    const { group, consumer } = this.options;
    return this.commands.sbaDeadLetter(
      stream,
      this.options.deadLetterStream(stream),
      group,
      id,
      String(this.options.maxLen),
      ...deadLetterFields({ stream, id, group, consumer, deliveries, reason, error, fields }),
    );
  }
}
