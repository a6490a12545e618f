/**
 * The Lua scripts, registered with ioredis `defineCommand`. The common path needs none: a hit is
 * one GET, a lock attempt one pipelined `SET NX` + GET, a fill one pipelined SET + GETDEL.
 * Scripts serve the rarer steps that must compare before acting. Each script's keys and channel
 * share one hash slot (see keys.ts), so they run on a Redis Cluster as well.
 *
 * A lock's value is its holder's token; a waiting instance appends WAITING to it, so the fill
 * publishes a notification only when some instance waits for it.
 */
export const WAITING = '|w';

/**
 * KEYS[1] value key, KEYS[2] lock key; ARGV[1] token, ARGV[2] lock ttl (ms).
 * Returns {1, value} when cached, {2} when the lock was taken, else marks the lock as waited
 * for and returns {3, pttl}.
 */
export const READ_OR_WAIT = {
  name: 'stampedeReadOrWait',
  numberOfKeys: 2,
  lua: `
local v = redis.call('GET', KEYS[1])
if v then return {1, v} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {2} end
local holder = redis.call('GET', KEYS[2])
if holder and string.sub(holder, -2) ~= '${WAITING}' then
  redis.call('SET', KEYS[2], holder .. '${WAITING}', 'KEEPTTL')
end
return {3, redis.call('PTTL', KEYS[2])}
`,
};

/**
 * KEYS[1] lock key; ARGV[1] token, ARGV[2] publish command, ARGV[3] channel, ARGV[4] message.
 * Deletes the lock only if the token holds it, and wakes the waiters if there are any.
 * Returns 1 if released.
 */
export const UNLOCK = {
  name: 'stampedeUnlock',
  numberOfKeys: 1,
  lua: `
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] or holder == ARGV[1] .. '${WAITING}' then
  redis.call('DEL', KEYS[1])
  if holder ~= ARGV[1] then redis.call(ARGV[2], ARGV[3], ARGV[4]) end
  return 1
end
return 0
`,
};

/** KEYS[1] lock key; ARGV[1] token, ARGV[2] ttl (ms). Resets the TTL if the token holds the lock. Returns 1 if extended. */
export const EXTEND_LOCK = {
  name: 'stampedeExtendLock',
  numberOfKeys: 1,
  lua: `
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] or holder == ARGV[1] .. '${WAITING}' then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`,
};

export const SCRIPTS = [READ_OR_WAIT, UNLOCK, EXTEND_LOCK];
