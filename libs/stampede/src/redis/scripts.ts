/**
 * Lua scripts, registered with ioredis `defineCommand`. Each script's keys share one hash slot
 * (see keys.ts), so they run on a Redis Cluster as well. Channels are not keys.
 */

/**
 * KEYS[1] value key, KEYS[2] lock key; ARGV[1] token, ARGV[2] lock ttl (ms).
 * Returns {1, value} when cached, {2} when the lock was taken, {3, pttl} when someone holds it.
 */
export const READ_OR_LOCK = {
  name: 'stampedeReadOrLock',
  numberOfKeys: 2,
  lua: `
local v = redis.call('GET', KEYS[1])
if v then return {1, v} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {2} end
return {3, redis.call('PTTL', KEYS[2])}
`,
};

/**
 * KEYS[1] value key, KEYS[2] lock key; ARGV[1] envelope, ARGV[2] ttl (ms), ARGV[3] token,
 * ARGV[4] channel, ARGV[5] message. Stores the value, releases the lock if the token still holds
 * it, and notifies the waiters. Returns 1.
 */
export const FILL_AND_UNLOCK = {
  name: 'stampedeFillAndUnlock',
  numberOfKeys: 2,
  lua: `
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if redis.call('GET', KEYS[2]) == ARGV[3] then redis.call('DEL', KEYS[2]) end
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
`,
};

/**
 * KEYS[1] lock key; ARGV[1] token, ARGV[2] channel, ARGV[3] message.
 * Deletes the lock only if the token holds it, then wakes the waiters. Returns 1 if released.
 */
export const UNLOCK = {
  name: 'stampedeUnlock',
  numberOfKeys: 1,
  lua: `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
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
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`,
};

export const SCRIPTS = [READ_OR_LOCK, FILL_AND_UNLOCK, UNLOCK, EXTEND_LOCK];
