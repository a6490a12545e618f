import type { Cluster, Redis } from 'ioredis';
import { LuaScript, registerScripts } from '@nest-redis-resilience/common';

/**
 * member-1: records this consumer as a live member of the group on a partitioned stream (or
 * removes it), drops the members that stopped renewing, and lists the live ones. Expiry times come
 * from the Redis clock, so the consumers' clocks do not matter.
 *   KEYS[1]  members (sorted set: consumer -> expiry in ms)
 *   ARGV[1]  consumer   ARGV[2]  lease ms   ARGV[3]  '1' to leave, '0' to stay
 * Returns the live members (any order).
 */
export const MEMBER_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if ARGV[3] == '1' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 3)
return redis.call('ZRANGE', KEYS[1], 0, -1)
`;

/**
 * lease-1: takes a partition's lease when it is free, or renews it when this consumer holds it
 * with `token`. A new lease gets the next fencing token of the partition (a counter that never
 * goes back), so a lease lost and taken again is a different lease.
 *   KEYS[1]  lease (string: "<consumer>|<token>", PX lease ms)   KEYS[2]  fencing counter
 *   ARGV[1]  consumer   ARGV[2]  lease ms   ARGV[3]  token held ('' to take a free lease)
 * Returns { 1, token } (held: taken or renewed), or { 0, holder } (another holds it, or the lease
 * held with `token` ended: holder is '' then).
 */
export const LEASE_LUA = `
local current = redis.call('GET', KEYS[1])
if ARGV[3] ~= '' then
  if current == ARGV[1] .. '|' .. ARGV[3] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, ARGV[3]}
  end
  return {0, current or ''}
end
if current then return {0, current} end
local token = tostring(redis.call('INCR', KEYS[2]))
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. token, 'PX', ARGV[2])
return {1, token}
`;

/**
 * release-1: gives a lease up, if it is still the one held.
 *   KEYS[1]  lease   ARGV[1]  "<consumer>|<token>"
 * Returns 1 when released, 0 when the lease was not held any more.
 */
export const RELEASE_LUA = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

/**
 * fenced-ack-1: acknowledges entries of an owned partition only while the lease is still the one
 * held, so a consumer that lost its partition (stalled past its lease) cannot ack what the new
 * owner took over.
 *   KEYS[1]  stream   KEYS[2]  lease
 *   ARGV[1]  group   ARGV[2]  "<consumer>|<token>"   ARGV[3..]  ids
 * Returns the number acknowledged, or -1 when the lease is not held.
 */
export const FENCED_ACK_LUA = `
if redis.call('GET', KEYS[2]) ~= ARGV[2] then return -1 end
local acked = 0
local n = #ARGV
for first = 3, n, 500 do
  acked = acked + redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, first, math.min(first + 499, n)))
end
return acked
`;

export interface LeaseScripts {
  sbaMember(
    members: string,
    consumer: string,
    leaseMs: string,
    leave: '0' | '1',
  ): Promise<string[]>;
  sbaLease(
    lease: string,
    counter: string,
    consumer: string,
    leaseMs: string,
    token: string,
  ): Promise<[0 | 1, string]>;
  sbaRelease(lease: string, holder: string): Promise<number>;
  sbaFencedAck(
    stream: string,
    lease: string,
    group: string,
    holder: string,
    ...ids: string[]
  ): Promise<number>;
}

/** The scripts of partition ownership, by command name. */
export const LEASE_SCRIPTS: readonly LuaScript[] = [
  { name: 'sbaMember', numberOfKeys: 1, lua: MEMBER_LUA },
  { name: 'sbaLease', numberOfKeys: 2, lua: LEASE_LUA },
  { name: 'sbaRelease', numberOfKeys: 1, lua: RELEASE_LUA },
  { name: 'sbaFencedAck', numberOfKeys: 2, lua: FENCED_ACK_LUA },
];

/** Registers the lease scripts on a client (see registerScripts). */
export function defineLeaseScripts<C extends Redis | Cluster>(client: C): C & LeaseScripts {
  return registerScripts<LeaseScripts, C>(client, LEASE_SCRIPTS);
}

/** The keys of a group's ownership of a partitioned stream. */
export const leaseKeys = {
  /** Live consumers of `group` on the logical stream. */
  members: (logical: string, group: string): string => `${logical}:members:${group}`,
  /** The lease of a partition (in the partition's slot). */
  lease: (partitionStream: string, group: string): string => `${partitionStream}:owner:${group}`,
  /** The fencing counter of a partition (in the partition's slot). */
  counter: (partitionStream: string, group: string): string =>
    `${partitionStream}:owner-token:${group}`,
};
