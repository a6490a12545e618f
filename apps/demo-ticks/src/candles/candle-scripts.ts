/*
 * Lua scripts of the candle store (embedded as text so that built apps carry them).
 * Key layout under <prefix> (default 'ticks:'):
 *   <prefix>symbols                       SET   symbols seen
 *   <prefix>last:<symbol>                 HASH  p (price), ts, id: the tick with the greatest (ts, id)
 *   <prefix>candle:<iv>:<symbol>:<start>  HASH  o h l c v n ot oid ct cid
 *   <prefix>index:<iv>:<symbol>           ZSET  candle starts (score = member = start)
 * and the transport's idempotency records (one per entry, 'done' once applied).
 */
import { IDEMPOTENT_EFFECT_LUA } from '@nest-redis-resilience/stream-batch-ack';

/**
 * apply-ticks: folds a batch of ticks into candles, each exactly once. For every tick, in the same
 * script: `sba_take` (the transport's IDEMPOTENT_EFFECT_LUA) marks its idempotency record done
 * only while this batch holds it, and the tick is folded only then; so a redelivery (a lost XACK,
 * a crashed consumer) or a second consumer cannot count it twice. A tick whose entry is no longer
 * pending was acknowledged, so it was applied before: it is skipped too (its record may have
 * expired since).
 * The fold is order-independent: open is the tick with the smallest (ts, entry id), close the one
 * with the greatest; so a redelivered old tick lands where it belongs.
 * Sums stay finite: a tick that would make the volume of one of its candles infinite (stored sum,
 * plus this batch's, plus its qty) is refused before its record is taken, and changes nothing;
 * the consumer dead-letters it.
 *
 * KEYS[1] symbols, KEYS[2] stream, KEYS[3..] the idempotency record of each tick
 * ARGV[1] prefix, ARGV[2] candles kept per symbol and interval (0 = all),
 * ARGV[3] intervals 'name:ms,name:ms,...', ARGV[4] group, ARGV[5] token, ARGV[6] done TTL (ms),
 * then 5 per tick: id, symbol, price, qty, ts
 * Returns one value per tick: 1 applied, 0 duplicate, or (refused) the string
 * '<interval>:<candle start>:<volume so far>' of the candle whose volume it would overflow.
 */
export const APPLY_TICKS_LUA = `${IDEMPOTENT_EFFECT_LUA}
local symbols, stream = KEYS[1], KEYS[2]
local prefix, keep, group, token, ttl = ARGV[1], tonumber(ARGV[2]), ARGV[4], ARGV[5], ARGV[6]
-- Redis does not roll back a script that fails halfway: fail before the first write instead.
local stype = redis.call('TYPE', symbols).ok
if stype ~= 'set' and stype ~= 'none' then
  return redis.error_reply('WRONGTYPE ' .. symbols .. ' is a ' .. stype .. ', not a set')
end
local ivs = {}
for name, len in string.gmatch(ARGV[3], '([^:,]+):(%d+)') do ivs[#ivs + 1] = { name, tonumber(len) } end

local function idparts(id)
  local ms, seq = string.match(id, '^(%d+)%-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
-- (ts1, id1) < (ts2, id2)
local function before(ts1, id1, ts2, id2)
  if ts1 ~= ts2 then return ts1 < ts2 end
  local m1, s1 = idparts(id1)
  local m2, s2 = idparts(id2)
  if m1 ~= m2 then return m1 < m2 end
  return s1 < s2
end

local function fmt(x) return string.format('%.17g', x) end
local function finite(x) return x == x and x > -math.huge and x < math.huge end
-- The stored state of each candle the batch touches, read once (used again in step 2, unless
-- step 2 deleted the candle).
local stored = {}
local out = {}
local candles, order = {}, {}
local lasts, symorder = {}, {}
local function storedCandle(key)
  local c = stored[key]
  if not c then
    c = redis.call('HMGET', key, 'h', 'l', 'ot', 'oid', 'ct', 'cid', 'v', 'n')
    stored[key] = c
  end
  return c
end

-- The candle whose volume the tick would make non-finite ('<interval>:<start>:<volume so far>'),
-- counting the stored sum and this batch's: step 2 writes stored + batch.
local function overflow(keys, starts, qty)
  for j = 1, #ivs do
    local a = candles[keys[j]]
    local batch = a and a.v or 0
    local sum = tonumber(storedCandle(keys[j])[7] or '0')
    if not finite(sum + (batch + qty)) then
      return ivs[j][1] .. ':' .. starts[j] .. ':' .. fmt(sum + batch)
    end
  end
  return nil
end

-- 1. Which ticks are new; fold the new ones into per-candle and per-symbol aggregates (reads only).
for i = 7, #ARGV, 5 do
  local id, sym, p, q, tss = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local record = KEYS[2 + (i - 2) / 5]
  local price, qty, ts = tonumber(p), tonumber(q), tonumber(tss)
  local keys, starts = {}, {}
  for j = 1, #ivs do
    local name, len = ivs[j][1], ivs[j][2]
    starts[j] = string.format('%.0f', ts - (ts % len))
    keys[j] = prefix .. 'candle:' .. name .. ':' .. sym .. ':' .. starts[j]
  end
  local result
  if #redis.call('XPENDING', stream, group, id, id, 1) == 0 then
    result = 0 -- acknowledged, so applied before
  else
    -- A refused tick's record is not taken: the consumer dead-letters it (and marks it done then).
    result = overflow(keys, starts, qty)
    if not result then result = sba_take(record, token, ttl) and 1 or 0 end
  end
  out[#out + 1] = result
  if result == 1 then
    for j = 1, #ivs do
      local name, start, key = ivs[j][1], starts[j], keys[j]
      local a = candles[key]
      if not a then
        a = { name = name, sym = sym, start = start, o = p, op = price, ot = ts, oid = id,
              h = p, hp = price, l = p, lp = price, c = p, ct = ts, cid = id, v = qty, n = 1 }
        candles[key] = a
        order[#order + 1] = key
      else
        if price > a.hp then a.h, a.hp = p, price end
        if price < a.lp then a.l, a.lp = p, price end
        if before(ts, id, a.ot, a.oid) then a.o, a.ot, a.oid = p, ts, id end
        if before(a.ct, a.cid, ts, id) then a.c, a.ct, a.cid = p, ts, id end
        a.v = a.v + qty
        a.n = a.n + 1
      end
    end
    local l = lasts[sym]
    if not l then
      lasts[sym] = { p = p, ts = ts, id = id }
      symorder[#symorder + 1] = sym
    elseif before(l.ts, l.id, ts, id) then
      l.p, l.ts, l.id = p, ts, id
    end
  end
end

-- 2. Merge each aggregate into its stored candle.
for _, key in ipairs(order) do
  local a = candles[key]
  local c = storedCandle(key)
  if not c[1] then
    redis.call('HSET', key, 'o', a.o, 'h', a.h, 'l', a.l, 'c', a.c, 'v', fmt(a.v), 'n', a.n,
      'ot', fmt(a.ot), 'oid', a.oid, 'ct', fmt(a.ct), 'cid', a.cid)
    local idx = prefix .. 'index:' .. a.name .. ':' .. a.sym
    redis.call('ZADD', idx, a.start, a.start)
    if keep > 0 then
      local extra = redis.call('ZCARD', idx) - keep
      if extra > 0 then
        local old = redis.call('ZRANGE', idx, 0, extra - 1)
        for _, s in ipairs(old) do
          local gone = prefix .. 'candle:' .. a.name .. ':' .. a.sym .. ':' .. s
          redis.call('DEL', gone)
          stored[gone] = nil -- read again if a later aggregate of this batch merges into it
        end
        redis.call('ZREMRANGEBYRANK', idx, 0, extra - 1)
      end
    end
  else
    local set = { 'v', fmt(tonumber(c[7]) + a.v), 'n', tonumber(c[8]) + a.n }
    if a.hp > tonumber(c[1]) then set[#set + 1] = 'h'; set[#set + 1] = a.h end
    if a.lp < tonumber(c[2]) then set[#set + 1] = 'l'; set[#set + 1] = a.l end
    if before(a.ot, a.oid, tonumber(c[3]), c[4]) then
      set[#set + 1] = 'o'; set[#set + 1] = a.o
      set[#set + 1] = 'ot'; set[#set + 1] = fmt(a.ot)
      set[#set + 1] = 'oid'; set[#set + 1] = a.oid
    end
    if before(tonumber(c[5]), c[6], a.ct, a.cid) then
      set[#set + 1] = 'c'; set[#set + 1] = a.c
      set[#set + 1] = 'ct'; set[#set + 1] = fmt(a.ct)
      set[#set + 1] = 'cid'; set[#set + 1] = a.cid
    end
    redis.call('HSET', key, unpack(set))
  end
end

-- 3. Latest price per symbol.
for _, sym in ipairs(symorder) do
  local l = lasts[sym]
  local lastKey = prefix .. 'last:' .. sym
  local cur = redis.call('HMGET', lastKey, 'ts', 'id')
  if not cur[1] then
    redis.call('HSET', lastKey, 'p', l.p, 'ts', fmt(l.ts), 'id', l.id)
    redis.call('SADD', symbols, sym)
  elseif before(tonumber(cur[1]), cur[2], l.ts, l.id) then
    redis.call('HSET', lastKey, 'p', l.p, 'ts', fmt(l.ts), 'id', l.id)
  end
end
return out
`;

/**
 * reject-tick: dead-letters an invalid tick once: takes its idempotency record (as apply-ticks
 * does) and adds the dead-letter entry in one step, so a redelivery adds no second one.
 *
 * KEYS[1] the idempotency record, KEYS[2] dead-letter stream
 * ARGV[1] token, ARGV[2] done TTL (ms), ARGV[3..] field/value pairs of the dead-letter entry
 * Returns 1 when dead-lettered now, 0 when it already was.
 */
export const REJECT_TICK_LUA = `${IDEMPOTENT_EFFECT_LUA}
if not sba_take(KEYS[1], ARGV[1], ARGV[2]) then return 0 end
redis.call('XADD', KEYS[2], '*', unpack(ARGV, 3))
return 1
`;
