import type { LuaScript } from '@nest-redis-resilience/common';

/**
 * idem-begin-1: check-and-mark a batch of keys in one call.
 *   KEYS     the records
 *   ARGV[1]  token of this batch   ARGV[2] lockMs
 * Returns one number per key: 0 acquired (now holds the token), 1 done, 2 + the remaining lock
 * time in ms for a key in progress elsewhere (2 for a key that appears twice in the batch).
 */
export const IDEMPOTENCY_BEGIN_LUA = `
local out = {}
for i, key in ipairs(KEYS) do
  local v = redis.call('GET', key)
  if v == 'done' then out[i] = 1
  elseif v == ARGV[1] then out[i] = 2
  elseif v then out[i] = 2 + math.max(0, redis.call('PTTL', key))
  else
    redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
    out[i] = 0
  end
end
return out
`;

/**
 * idem-finish-1: after the handler, marks the succeeded keys done and forgets the failed ones.
 *   KEYS     done records, then failed records
 *   ARGV[1]  token   ARGV[2] ttlMs   ARGV[3] number of done records
 * A record is changed only while it holds the token (or, for done, has expired): a key that
 * another consumer took over after our lock expired is left to that consumer.
 */
export const IDEMPOTENCY_FINISH_LUA = `
local doneCount = tonumber(ARGV[3])
for i, key in ipairs(KEYS) do
  local v = redis.call('GET', key)
  if i <= doneCount then
    if v == ARGV[1] or not v then redis.call('SET', key, 'done', 'PX', ARGV[2]) end
  elseif v == ARGV[1] then
    redis.call('DEL', key)
  end
end
return 0
`;

/**
 * idem-done-2: marks entry ids done (the default key, see done-sets.ts).
 *   KEYS[1]  the done set of one slice of ids   KEYS[2] (optional) the scope's greatest done id
 *   ARGV[1]  ttlMs   ARGV[2] the greatest of the ids   ARGV[3] the ids, joined by commas
 * The ids travel as one argument: a client spends far less on one string than on 500 arguments.
 * The set and the greatest id then expire ttlMs after the last mark.
 */
export const IDEMPOTENCY_MARK_DONE_LUA = `
local ids = {}
for id in string.gmatch(ARGV[3], '[^,]+') do ids[#ids + 1] = id end
for i = 1, #ids, 4000 do
  redis.call('SADD', KEYS[1], unpack(ids, i, math.min(i + 3999, #ids)))
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
if KEYS[2] then
  local function digits(a, b)
    if #a ~= #b then return #a < #b end
    return a < b
  end
  local function less(a, b)
    local am, as = string.match(a, '^(%d+)%-?(%d*)$')
    local bm, bs = string.match(b, '^(%d+)%-?(%d*)$')
    if not am or not bm then return not am end
    if am ~= bm then return digits(am, bm) end
    return digits(as == '' and '0' or as, bs == '' and '0' or bs)
  end
  local old = redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[1], 'GET')
  if old and less(ARGV[2], old) then redis.call('SET', KEYS[2], old, 'PX', ARGV[1]) end
end
return 0
`;

/** The idempotency store's scripts; each call passes its number of keys first. */
export const IDEMPOTENCY_SCRIPTS: readonly LuaScript[] = [
  { name: 'sbaIdemBegin', lua: IDEMPOTENCY_BEGIN_LUA },
  { name: 'sbaIdemFinish', lua: IDEMPOTENCY_FINISH_LUA },
  { name: 'sbaIdemMarkDone', lua: IDEMPOTENCY_MARK_DONE_LUA },
];

export interface IdempotencyScripts {
  sbaIdemBegin(...args: (string | number)[]): Promise<number[]>;
  sbaIdemFinish(...args: (string | number)[]): Promise<number>;
  sbaIdemMarkDone(...args: (string | number)[]): Promise<number>;
}

/**
 * A Lua function to paste at the top of your own script, to make an effect stored in Redis and
 * its "done" mark one atomic step:
 *
 *   if sba_take(KEYS[i], token, ttlMs) then ...apply the effect of entry i... end
 *
 * `sba_take` returns true, and marks the record done, while the record is free (the default key:
 * the transport writes no mark before the handler), holds this batch's token (a key of your own,
 * marked in progress by the transport) or has expired; a record that is already done or held by
 * another run returns false. The records and the token are in the context (`ctx.getIdempotency()`). On
 * a Cluster the records and the effect's keys must share a hash slot (a hash tag in
 * `idempotency.keyPrefix`).
 */
export const IDEMPOTENT_EFFECT_LUA = `
local function sba_take(record, token, ttlMs)
  local v = redis.call('GET', record)
  if v == token or not v then
    redis.call('SET', record, 'done', 'PX', ttlMs)
    return true
  end
  return false
end
`;
