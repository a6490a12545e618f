import {
  partitionOf,
  partitionStream,
  partitionStreams,
} from '@nest-redis-resilience/stream-batch-ack';
import type { TickPlacement } from '../candles/candle-store';

/**
 * The physical streams of the ticks and the one each symbol goes to: with TICKS_PARTITIONS, the
 * partitions of TICKS_STREAM (`ticks:{<tag>}`, spread over the hash slots) chosen by symbol as the
 * collector's client does (`partitionOf(symbol, n)`); else TICKS_STREAM itself.
 */
export function tickPlacement(settings: { stream: string; partitions: number }): TickPlacement {
  const { stream, partitions } = settings;
  if (partitions === 0) return { streams: [stream], streamOf: () => stream };
  return {
    streams: partitionStreams(stream, partitions),
    streamOf: (symbol) => partitionStream(stream, partitionOf(symbol, partitions), partitions),
  };
}

/** The transport's `partitions` option (server and client): `{ [stream]: n }`, or none. */
export function partitionsOption(settings: {
  stream: string;
  partitions: number;
}): Record<string, number> | undefined {
  return settings.partitions > 0 ? { [settings.stream]: settings.partitions } : undefined;
}
