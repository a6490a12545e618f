import type { Cluster, Redis } from 'ioredis';
import {
  IDEMPOTENT_EFFECT_LUA,
  RedisStreamsBatchContext,
} from '@nest-redis-resilience/stream-batch-ack';

/**
 * The effect of a batch of ticks, atomic with their idempotency "done" marks: one script per
 * batch, `HINCRBY effects n 1` for each entry whose record this batch still holds.
 *   KEYS[1] the effects hash   KEYS[2..] the entries' idempotency records
 *   ARGV[1] token   ARGV[2] ttlMs   ARGV[3..] the entries' n
 * Returns the n whose effect was applied by this call.
 */
export const BATCH_EFFECT_LUA = `${IDEMPOTENT_EFFECT_LUA}
local applied = {}
for i = 2, #KEYS do
  if sba_take(KEYS[i], ARGV[1], ARGV[2]) then
    redis.call('HINCRBY', KEYS[1], ARGV[i + 1], 1)
    applied[#applied + 1] = ARGV[i + 1]
  end
end
return applied
`;

/** Applies the effects of a batch (see BATCH_EFFECT_LUA); resolves with the n applied. */
export async function applyBatchEffects(
  redis: Redis | Cluster,
  effects: string,
  ticks: readonly { n: number }[],
  ctx: RedisStreamsBatchContext,
): Promise<number[]> {
  const idem = ctx.idempotency;
  if (!idem) throw new Error('no idempotency handle: the handler needs the Redis store');
  const records = ctx.entries.map((e) => {
    if (!e.idempotencyRecord) throw new Error(`entry ${e.id} has no idempotency record`);
    return e.idempotencyRecord;
  });
  const applied = (await redis.eval(
    BATCH_EFFECT_LUA,
    1 + records.length,
    effects,
    ...records,
    idem.token,
    idem.ttlMs,
    ...ticks.map((t) => t.n),
  )) as string[];
  return applied.map(Number);
}
