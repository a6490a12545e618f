import { Cluster } from 'ioredis';
import type { Envelope, EnvelopeCodec } from '../core/envelope';
import { bySlot } from './key-slot';
import type { RedisClient } from './redis-connection';
import { decodeStored } from './value-lock';

/**
 * The envelopes stored at `names` (Redis keys), in their order: one MGET; on a Cluster, one MGET
 * per slot, sent together (a batch's keys usually span slots, and a multi-key command must stay
 * within one).
 */
export async function mget<T>(
  client: RedisClient,
  names: string[],
  codec: EnvelopeCodec,
): Promise<(Envelope<T> | undefined)[]> {
  let raws: (string | null)[];
  if (names.length === 0) return [];
  if (client instanceof Cluster) {
    raws = new Array<string | null>(names.length);
    await Promise.all(
      bySlot(names).map(async (group) => {
        const replies = await client.mget(group.map((i) => names[i]));
        group.forEach((index, j) => (raws[index] = replies[j]));
      }),
    );
  } else {
    raws = await client.mget(names);
  }
  return raws.map((raw) => decodeStored<T>(codec, raw));
}
