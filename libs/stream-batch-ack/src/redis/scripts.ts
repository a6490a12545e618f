import type { Cluster, Redis } from 'ioredis';
import { LuaScript, registerScripts } from '@nest-redis-resilience/common';

/**
 * dead-letter-2: moves one entry to the dead-letter stream and acknowledges it, atomically.
 *   KEYS[1]  source stream
 *   KEYS[2]  dead-letter stream
 *   ARGV[1]  group
 *   ARGV[2]  id of the entry in the source stream
 *   ARGV[3]  MAXLEN of the dead-letter stream ('0': unbounded)
 *   ARGV[4..] field, value, ... of the dead-letter entry
 * Returns the id of the dead-letter entry.
 */
export const DEAD_LETTER_LUA = `
local args = {}
if ARGV[3] ~= '0' then
  table.insert(args, 'MAXLEN')
  table.insert(args, '~')
  table.insert(args, ARGV[3])
end
table.insert(args, '*')
for i = 4, #ARGV do table.insert(args, ARGV[i]) end
local added = redis.call('XADD', KEYS[2], unpack(args))
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
return added
`;

/**
 * safe-trim-1: trims a stream to about `maxLen` entries without deleting an entry that a group
 * still needs (delivered and not acknowledged, or not delivered yet).
 *   KEYS[1]  stream
 *   ARGV[1]  maxLen
 * The boundary is MINID = min(id of the first entry that MAXLEN would keep, for every group: its
 * oldest pending id, or its last-delivered-id when nothing is pending). Entries below it go.
 * Returns { number of entries deleted, the MINID used or '' }.
 */
export const SAFE_TRIM_LUA = `
local function parse(id)
  local dash = string.find(id, '-', 1, true)
  if not dash then return tonumber(id), 0 end
  return tonumber(string.sub(id, 1, dash - 1)), tonumber(string.sub(id, dash + 1))
end
local function less(a, b)
  local am, as = parse(a)
  local bm, bs = parse(b)
  if am ~= bm then return am < bm end
  return as < bs
end
local maxLen = tonumber(ARGV[1])
local len = redis.call('XLEN', KEYS[1])
if len <= maxLen then return {0, ''} end
local excess = len - maxLen
local range = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', excess + 1)
if #range <= excess then return {0, ''} end
local boundary = range[#range][1]
local groups = redis.call('XINFO', 'GROUPS', KEYS[1])
for _, g in ipairs(groups) do
  local info = {}
  for i = 1, #g, 2 do info[g[i]] = g[i + 1] end
  local keep = info['last-delivered-id']
  if tonumber(info['pending']) > 0 then
    local summary = redis.call('XPENDING', KEYS[1], info['name'])
    keep = summary[2]
  end
  if less(keep, boundary) then boundary = keep end
end
local deleted = redis.call('XTRIM', KEYS[1], 'MINID', boundary)
return {deleted, boundary}
`;

const IS_MARKED_LUA = `
local function is_marked(key, marker)
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
    for i = 1, #g, 2 do
      if g[i] == 'name' and g[i + 1] == marker then return true end
    end
  end
  return false
end
local function expire_at_least(key, ttl)
  if redis.call('PTTL', key) < tonumber(ttl) then redis.call('PEXPIRE', key, ttl) end
end
`;

/**
 * reply-1: appends a reply to a client's reply stream, only if that key is a stream that a client
 * created (it has the marker group), so that a request can't make the server trim or expire
 * another key. Then the stream expires `ttl` ms later at the earliest (never sooner than set).
 *   KEYS[1]  reply stream
 *   ARGV[1]  marker group   ARGV[2]  MAXLEN ~   ARGV[3]  ttl ms   ARGV[4..] field, value, ...
 * Returns { 1, reply id }, or { 0, why }: the key's type ('none', 'string', ...) or 'unmarked'.
 */
export const REPLY_LUA = `${IS_MARKED_LUA}
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'stream' then return {0, kind} end
if not is_marked(KEYS[1], ARGV[1]) then return {0, 'unmarked'} end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, 4))
expire_at_least(KEYS[1], ARGV[3])
return {1, id}
`;

/**
 * reply-stream-1: creates (or keeps) a client's reply stream with the marker group, and makes
 * it live `ttl` ms at least.
 *   KEYS[1]  reply stream   ARGV[1]  marker group   ARGV[2]  ttl ms
 * Fails when the key exists and is not a stream.
 */
export const REPLY_STREAM_LUA = `${IS_MARKED_LUA}
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], '$', 'MKSTREAM')
elseif kind ~= 'stream' then
  return redis.error_reply('the reply stream ' .. KEYS[1] .. ' exists and is a ' .. kind .. ', not a stream')
elseif not is_marked(KEYS[1], ARGV[1]) then
  redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], '$')
end
expire_at_least(KEYS[1], ARGV[2])
return 1
`;

/**
 * keep-claimed-1: resets the idle time of the entries that this consumer still owns, so that no
 * other consumer's claim loop takes them over while their handlers run here. XCLAIM does not
 * check the owner: each id's owner is read first (XPENDING), in the same script, so that an entry
 * another consumer took over (after this one stalled) is never taken back. `JUSTID` leaves the
 * delivery counter alone.
 *   KEYS[1]  stream
 *   ARGV[1]  group   ARGV[2]  consumer   ARGV[3..]  ids
 * Returns { entries refreshed, ids that another consumer owns now }.
 */
export const KEEP_CLAIMED_LUA = `
local mine = {KEYS[1], ARGV[1], ARGV[2], 0}
local taken = {}
for i = 3, #ARGV do
  local row = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)[1]
  if row then
    if row[2] == ARGV[2] then mine[#mine + 1] = ARGV[i] else taken[#taken + 1] = ARGV[i] end
  end
end
if #mine == 4 then return {0, taken} end
mine[#mine + 1] = 'JUSTID'
return {#redis.call('XCLAIM', unpack(mine)), taken}
`;

export interface StreamScripts {
  sbaDeadLetter(
    stream: string,
    deadLetterStream: string,
    group: string,
    id: string,
    maxLen: string,
    ...fields: string[]
  ): Promise<string>;
  sbaSafeTrim(stream: string, maxLen: string): Promise<[number, string]>;
  sbaKeepClaimed(
    stream: string,
    group: string,
    consumer: string,
    ...ids: string[]
  ): Promise<[number, string[]]>;
  sbaReply(
    replyStream: string,
    marker: string,
    maxLen: string,
    ttlMs: string,
    ...fields: string[]
  ): Promise<[0 | 1, string]>;
  sbaReplyStream(replyStream: string, marker: string, ttlMs: string): Promise<number>;
}

/** The scripts of the transport's command client, by command name. */
export const STREAM_SCRIPTS: readonly LuaScript[] = [
  { name: 'sbaDeadLetter', numberOfKeys: 2, lua: DEAD_LETTER_LUA },
  { name: 'sbaSafeTrim', numberOfKeys: 1, lua: SAFE_TRIM_LUA },
  { name: 'sbaKeepClaimed', numberOfKeys: 1, lua: KEEP_CLAIMED_LUA },
  { name: 'sbaReply', numberOfKeys: 1, lua: REPLY_LUA },
  { name: 'sbaReplyStream', numberOfKeys: 1, lua: REPLY_STREAM_LUA },
];

/** Registers the scripts on a client (see registerScripts). */
export function defineStreamScripts<C extends Redis | Cluster>(client: C): C & StreamScripts {
  return registerScripts<StreamScripts, C>(client, STREAM_SCRIPTS);
}
