import type { Attributes } from '@opentelemetry/api';
import * as N from './telemetry.names';

/** Attribute objects of one stream and group, built once (no allocation per message). */
export interface StreamAttributes {
  base: Attributes;
  consumed: Attributes;
  processOne: Attributes;
  processBatch: Attributes;
  settle: Attributes;
  memory: Attributes;
  redis: Attributes;
  /** By dead-letter reason, made on first use (see reasonAttributes). */
  reasons: Map<string, Attributes>;
}

export function streamAttributes(stream: string, group: string): StreamAttributes {
  const base: Attributes = {
    [N.ATTR_SYSTEM]: N.SYSTEM,
    [N.ATTR_DESTINATION]: stream,
    [N.ATTR_GROUP]: group,
  };
  const process: Attributes = {
    ...base,
    [N.ATTR_OPERATION_NAME]: 'process',
    [N.ATTR_OPERATION_TYPE]: 'process',
  };
  return {
    base,
    consumed: { ...base, [N.ATTR_OPERATION_NAME]: 'receive', [N.ATTR_OPERATION_TYPE]: 'receive' },
    processOne: { ...process, [N.ATTR_BATCH]: false },
    processBatch: { ...process, [N.ATTR_BATCH]: true },
    settle: { ...base, [N.ATTR_OPERATION_NAME]: 'ack', [N.ATTR_OPERATION_TYPE]: 'settle' },
    memory: { ...base, [N.ATTR_LAYER]: 'memory' },
    redis: { ...base, [N.ATTR_LAYER]: 'redis' },
    reasons: new Map(),
  };
}

export function reasonAttributes(a: StreamAttributes, reason: string): Attributes {
  let attrs = a.reasons.get(reason);
  if (!attrs) a.reasons.set(reason, (attrs = { ...a.base, [N.ATTR_DEAD_LETTER_REASON]: reason }));
  return attrs;
}
