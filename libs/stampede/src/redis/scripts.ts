import { VALUE_LOCK, VALUE_LOCK_LUA, WAITING } from './value-lock';

/**
 * The Lua scripts, registered with ioredis `defineCommand`. The common path needs none: a hit is
 * one GET, a lock attempt one `SET NX` of a lock mark in the value key (see value-lock.ts), a
 * fill one `SET GET` of the value over it. Scripts serve the rarer steps that must compare
 * before acting. Each script's keys and channel share one hash slot (see keys.ts), so they run
 * on a Redis Cluster as well.
 *
 * A lock mark ends with its holder's token; a waiting instance appends WAITING to it, so the fill
 * publishes a notification only when some instance waits for it.
 */
const IS_LOCK = `local function isLock(text) return string.sub(text, 1, ${VALUE_LOCK.length}) == '${VALUE_LOCK_LUA}' end`;

/**
 * KEYS[1] value key, KEYS[2] refresh lock key; ARGV[1] lock mark, ARGV[2] lock ttl (ms).
 * Returns {2} when the lock was taken (the key was empty); {3, pttl} when a miss holds it, after
 * marking it as waited for; else {1, value}, with the pttl of a refresh in flight as a third
 * element (its lock then marked as waited for too: a caller that finds the value expired waits
 * for that refresh's fill).
 */
export const READ_OR_WAIT = {
  name: 'stampedeReadOrWait',
  numberOfKeys: 2,
  lua: `${IS_LOCK}
local function markWaited(key, holder)
  if string.sub(holder, -2) ~= '${WAITING}' then
    redis.call('SET', key, holder .. '${WAITING}', 'KEEPTTL')
  end
end
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {2}
end
if isLock(v) then
  markWaited(KEYS[1], v)
  return {3, redis.call('PTTL', KEYS[1])}
end
local refresh = redis.call('GET', KEYS[2])
if not refresh then return {1, v} end
markWaited(KEYS[2], refresh)
return {1, v, redis.call('PTTL', KEYS[2])}
`,
};

/**
 * KEYS[1] the key holding the lock (the value key's mark, or a refresh's lock key); ARGV[1] the
 * holder's text, ARGV[2] publish command, ARGV[3] channel, ARGV[4] message. Deletes the lock only
 * if it is still that holder's, and wakes the waiters if there are any.
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

/** KEYS[1] the key holding the lock; ARGV[1] the holder's text, ARGV[2] ttl (ms). Resets the TTL if it still holds the lock. Returns 1 if extended. */
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
 * Tag versions (see core/tag-versions.ts): a tag key holds its version, or after a soft
 * invalidation `version:hardFloor` (values stamped below the floor are invalid, the others up to
 * the version stale). `version` reads the version as a number, or nil when missing or not one;
 * `hardOf` the floor; `least` is the least version a new one may take, from the caller's floor
 * and the server's clock in microseconds, so versions set after the key was lost start above the
 * ones before it.
 */
const TAG_VERSION_OF = `
local function number(text)
  local n = tonumber(text)
  if n and n >= 0 and n < 9007199254740992 and n == math.floor(n) then return n end
end
local function version(raw)
  if not raw then return nil end
  return number(string.match(raw, '^(%d+):%d+$') or raw)
end
local function hardOf(raw, v)
  local h = number(string.match(raw, '^%d+:(%d+)$'))
  if h and h < v then return h end
  return v
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
 * KEYS[1] value key; ARGV[1] invalidation bus channel, ARGV[2] message. Deletes the value (not a
 * lock mark: its holder's fill comes next) and tells the other instances in one step: a delete
 * carried out late is broadcast all the same.
 */
export const INVALIDATE = {
  name: 'stampedeInvalidate',
  numberOfKeys: 1,
  lua: `${IS_LOCK}
local v = redis.call('GET', KEYS[1])
if v and not isLock(v) then redis.call('DEL', KEYS[1]) end
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
`,
};

/**
 * KEYS[1] tag key; ARGV[1] floor. Returns {version, hard floor}; a missing version is set first
 * (as TAG_VERSION), with itself as floor.
 */
export const TAG_STATE = {
  name: 'stampedeTagState',
  numberOfKeys: 1,
  lua: `${TAG_VERSION_OF}
local raw = redis.call('GET', KEYS[1])
local v = version(raw)
if v then return {v, hardOf(raw, v)} end
v = least(ARGV[1])
redis.call('SET', KEYS[1], string.format('%.0f', v))
return {v, v}
`,
};

/**
 * KEYS[1] tag key; ARGV as TAG_BUMP. A soft invalidation: a new version as TAG_BUMP, while the
 * hard floor stays (values stamped since it turn stale, not invalid); a lost version has none.
 */
export const TAG_SOFT_BUMP = {
  name: 'stampedeTagSoftBump',
  numberOfKeys: 1,
  lua: `${TAG_VERSION_OF}
local raw = redis.call('GET', KEYS[1])
local old = version(raw)
local v = math.max((old or 0) + 1, least(ARGV[1]))
local h = v
if old then h = hardOf(raw, old) end
local text = string.format('%.0f', v)
if h < v then text = text .. ':' .. string.format('%.0f', h) end
redis.call('SET', KEYS[1], text)
if ARGV[2] then redis.call('PUBLISH', ARGV[2], ARGV[3] .. string.format('%.0f', v) .. ARGV[4]) end
return v
`,
};

/**
 * KEYS[1] value key; ARGV[1] text, ARGV[2] ttl (ms), ARGV[3] invalidation bus channel, ARGV[4]
 * message. Stores a value written by the app (not a load) and tells the other instances in one
 * step, so they drop their copy.
 */
export const REPLACE = {
  name: 'stampedeReplace',
  numberOfKeys: 1,
  lua: `
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
`,
};

/**
 * KEYS[1] value key; ARGV[1] the text read, ARGV[2] the same value made stale, ARGV[3] its grace
 * (ms), ARGV[4] invalidation bus channel, ARGV[5] message. Writes the stale text, kept for its
 * grace, and tells the other instances, only if the value is still the one read (else 0: it was
 * refilled or dropped meanwhile).
 */
export const SOFT_EXPIRE = {
  name: 'stampedeSoftExpire',
  numberOfKeys: 1,
  lua: `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
`,
};

/**
 * KEYS[1] value key. Deletes the value, not a lock mark: callers that found the same invalidated
 * value drop it one after the other, and the second must not free the first one's lock.
 * Returns 1 if deleted.
 */
export const DROP_VALUE = {
  name: 'stampedeDropValue',
  numberOfKeys: 1,
  lua: `${IS_LOCK}
local v = redis.call('GET', KEYS[1])
if v and not isLock(v) then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`,
};

export const SCRIPTS = [
  DROP_VALUE,
  READ_OR_WAIT,
  UNLOCK,
  EXTEND_LOCK,
  TAG_VERSION,
  TAG_BUMP,
  INVALIDATE,
  TAG_STATE,
  TAG_SOFT_BUMP,
  REPLACE,
  SOFT_EXPIRE,
];
