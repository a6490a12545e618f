import { defaultDeadLetterStream } from '@nest-redis-resilience/stream-batch-ack';
import type { ConsumerSettings } from '../config/ticks-env.schema';

/** The hash tag of a key (what Redis Cluster hashes): the text between the first `{` and the next `}`, when not empty. */
export function hashTag(key: string): string | undefined {
  const open = key.indexOf('{');
  if (open < 0) return undefined;
  const close = key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : undefined;
}

/** The dead-letter stream of the entries of `stream` (a partition, on a Cluster: in its slot). */
export function deadLetterStreamOf(consumer: ConsumerSettings, stream: string): string {
  return consumer.deadLetterPerStream ? defaultDeadLetterStream(stream) : consumer.deadLetterStream;
}
