import { randomUUID } from 'node:crypto';

const PROCESS = randomUUID();
let sequence = 0;

/**
 * A lock token no other holder has: random per process, then a counter (a UUID per lock attempt
 * cost a few hundred bytes and a CSPRNG draw each).
 */
export function lockToken(): string {
  return `${PROCESS}:${(++sequence).toString(36)}`;
}
