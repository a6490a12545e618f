/**
 * The Lua scripts, registered with ioredis `defineCommand`. The common path needs none: a hit is
 * one GET, a lock attempt one `SET NX`, a fill one pipelined SET of the value and `SET GET` of
 * the lock. Scripts serve the rarer steps that must compare before acting. Each script's keys and
 * channel share one hash slot (see keys.ts), so they run on a Redis Cluster as well.
 *
 * A lock's value is its holder's token; a waiting instance appends WAITING to it, so the fill
 * publishes a notification only when some instance waits for it. A fill leaves FILLED in the lock
 * for a moment: a caller that missed just before the fill finds the lock taken instead of taking
 * it, and reads the value (READ_OR_WAIT, which takes a FILLED lock when the value is gone).
 */
export const WAITING = '|w';
export const FILLED = '|filled';

/**
 * KEYS[1] value key, KEYS[2] lock key; ARGV[1] token, ARGV[2] lock ttl (ms).
 * Returns {1, value} when cached, {2} when the lock was taken (free, or FILLED by a value that
 * is gone since), else marks the lock as waited for and returns {3, pttl}.
 */
export const READ_OR_WAIT = {
  name: 'stampedeReadOrWait',
  numberOfKeys: 2,
  lua: `
local v = redis.call('GET', KEYS[1])
if v then return {1, v} end
local holder = redis.call('GET', KEYS[2])
if not holder or holder == '${FILLED}' then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
  return {2}
end
if string.sub(holder, -2) ~= '${WAITING}' then
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

/**
 * Tag versions (see core/tag-versions.ts): a version read as a number, or nil when missing or not
 * one; and the least version a new one may take, from the caller's floor and the server's clock
 * in microseconds, so versions set after the key was lost start above the ones before it.
 */
const TAG_VERSION_OF = `
local function version(raw)
  local n = tonumber(raw)
  if n and n >= 0 and n < 9007199254740992 and n == math.floor(n) then return n end
end
local function least(floor)
  local t = redis.call('TIME')
  return math.max(tonumber(floor), tonumber(t[1]) * 1000000 + tonumber(t[2]))
end
`;

/**
 * KEYS[1] tag key; ARGV[1] floor. Returns the tag's version; a missing one (never set, or lost)
 * is set first, above the floor and the server's clock.
 */
export const TAG_VERSION = {
  name: 'stampedeTagVersion',
  numberOfKeys: 1,
  lua: `${TAG_VERSION_OF}
local v = version(redis.call('GET', KEYS[1]))
if v then return v end
v = least(ARGV[1])
redis.call('SET', KEYS[1], string.format('%.0f', v))
return v
`,
};

/**
 * KEYS[1] tag key; ARGV[1] floor; optionally ARGV[2] invalidation bus channel, ARGV[3] and
 * ARGV[4] the message's text before and after the version. Sets a new version, above the current
 * one, the floor and the server's clock, and with a channel tells the other instances in the same
 * step (a version set late is broadcast all the same); returns it.
 */
export const TAG_BUMP = {
  name: 'stampedeTagBump',
  numberOfKeys: 1,
  lua: `${TAG_VERSION_OF}
local v = math.max((version(redis.call('GET', KEYS[1])) or 0) + 1, least(ARGV[1]))
local text = string.format('%.0f', v)
redis.call('SET', KEYS[1], text)
if ARGV[2] then redis.call('PUBLISH', ARGV[2], ARGV[3] .. text .. ARGV[4]) end
return v
`,
};

/**
 * KEYS[1] value key, KEYS[2] lock key; ARGV[1] invalidation bus channel, ARGV[2] message.
 * Deletes the value (and a FILLED mark, so the next caller takes the lock at once) and tells the
 * other instances in one step: a delete carried out late is broadcast all the same.
 */
export const INVALIDATE = {
  name: 'stampedeInvalidate2',
  numberOfKeys: 2,
  lua: `
redis.call('DEL', KEYS[1])
if redis.call('GET', KEYS[2]) == '${FILLED}' then redis.call('DEL', KEYS[2]) end
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
`,
};

export const SCRIPTS = [READ_OR_WAIT, UNLOCK, EXTEND_LOCK, TAG_VERSION, TAG_BUMP, INVALIDATE];
