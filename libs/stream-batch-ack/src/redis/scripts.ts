import type { Cluster, Redis } from 'ioredis';

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
}

/** Registers the scripts on a client (EVALSHA with a fallback to EVAL, via ioredis `defineCommand`). */
export function defineStreamScripts<C extends Redis | Cluster>(client: C): C & StreamScripts {
  const c = client as C & Partial<StreamScripts>;
  if (!c.sbaDeadLetter)
    client.defineCommand('sbaDeadLetter', { numberOfKeys: 2, lua: DEAD_LETTER_LUA });
  if (!c.sbaSafeTrim) client.defineCommand('sbaSafeTrim', { numberOfKeys: 1, lua: SAFE_TRIM_LUA });
  if (!c.sbaKeepClaimed)
    client.defineCommand('sbaKeepClaimed', { numberOfKeys: 1, lua: KEEP_CLAIMED_LUA });
  return client as C & StreamScripts;
}

/**
 * idempotency-release-1: deletes an idempotency record only if it still holds our token.
 *   KEYS[1] record  ARGV[1] token   Returns 1 when deleted.
 */
export const IDEMPOTENCY_RELEASE_LUA = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;
