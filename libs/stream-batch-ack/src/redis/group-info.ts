import type { Cluster, Redis } from 'ioredis';

/** One consumer group of a stream, from `XINFO GROUPS`. */
export interface GroupInfo {
  name: string;
  consumers: number;
  /** Entries delivered and not acknowledged. */
  pending: number;
  /** Entries not delivered to the group yet; null when Redis cannot tell (Redis < 7, or after XDEL/XTRIM). */
  lag: number | null;
  lastDeliveredId: string;
}

/**
 * `XINFO GROUPS stream`, the group `group` of it (undefined when it does not exist). Rejects when
 * Redis does not answer within `timeoutMs`. Used by the health indicator and the lag/pending gauges.
 */
export async function readGroupInfo(
  client: Redis | Cluster,
  stream: string,
  group: string,
  timeoutMs: number,
): Promise<GroupInfo | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const groups = (await Promise.race([
      client.call('XINFO', 'GROUPS', stream),
      new Promise<never>(
        (_, reject) =>
          (timer = setTimeout(
            () => reject(new Error(`Redis did not answer within ${timeoutMs} ms`)),
            timeoutMs,
          )),
      ),
    ])) as unknown[][];
    const info = groups.map(toRecord).find((g) => g.name === group);
    if (!info) return undefined;
    return {
      name: group,
      consumers: Number(info.consumers ?? 0),
      pending: Number(info.pending ?? 0),
      lag: info.lag === null || info.lag === undefined ? null : Number(info.lag),
      lastDeliveredId: String(info['last-delivered-id'] ?? ''),
    };
  } finally {
    clearTimeout(timer);
  }
}

/** A reply of `XINFO` (name, value, name, value, ...) as an object. */
export function toRecord(flat: unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[String(flat[i])] = flat[i + 1];
  return out;
}

/**
 * `XGROUP CREATE stream group id MKSTREAM`: true when it created the group, false when the group
 * exists already (`BUSYGROUP`, e.g. another consumer created it first).
 */
export async function createGroup(
  client: Redis | Cluster,
  stream: string,
  group: string,
  id: string,
): Promise<boolean> {
  try {
    await client.call('XGROUP', 'CREATE', stream, group, id, 'MKSTREAM');
    return true;
  } catch (err) {
    if (err instanceof Error && err.message.startsWith('BUSYGROUP')) return false;
    throw err;
  }
}
