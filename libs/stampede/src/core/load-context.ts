import { AsyncLocalStorage } from 'node:async_hooks';
import { Duration, toMs } from './duration';
import { checkTags } from './policy';

/**
 * What a loader may say about the value it returns, from the data itself: its TTL, its grace,
 * more tags, or that it must not be cached. Set the fields before the loader returns; the value
 * is then stored with them instead of the policy's. Reached as the second argument of a
 * `getOrLoad` loader, or through `currentLoadContext()` in a decorated method.
 */
export class LoadContext {
  /** Time to live of this value (no jitter applied); default the policy's. */
  ttl?: Duration;
  /** Grace of this value (kept and served stale this long past its TTL; 0: none); default the policy's. */
  grace?: Duration;
  /** Tags added to the policy's, for `invalidateTags`. */
  tags?: string[];
  /** Do not cache this value (it is still returned to the callers). */
  skip?: boolean;

  constructor(
    /** The key being loaded. */
    readonly key: string,
    /** Aborts when the load passes its hard timeout. */
    readonly signal: AbortSignal,
  ) {}
}

/** What the fill uses of a load context, validated; undefined fields take the policy's. */
export interface LoadSettings {
  ttl?: number;
  grace?: number;
  tags?: string[];
  skip: boolean;
}

/** Validates what the loader set; errors name `where` (the method or getOrLoad name). */
export function loadSettings(context: LoadContext | undefined, where: string): LoadSettings {
  if (!context) return { skip: false };
  const { ttl, grace, tags, skip } = context;
  return {
    ttl: ttl === undefined ? undefined : toMs(ttl, `${where}: load context ttl`),
    grace:
      grace === undefined
        ? undefined
        : grace === 0
          ? 0
          : toMs(grace, `${where}: load context grace`),
    tags:
      tags === undefined || tags.length === 0
        ? undefined
        : checkTags(tags, `${where}: load context tags`),
    skip: skip === true,
  };
}

const loadContexts = new AsyncLocalStorage<LoadContext>();

/**
 * The context of the load that runs the calling code: in a decorated method's body, where the
 * value is loaded (a miss or a refresh), the way to set its TTL, grace or tags from the data.
 * Undefined outside a load (for example a call that was not wrapped).
 */
export function currentLoadContext(): LoadContext | undefined {
  return loadContexts.getStore();
}

/** Runs `fn` with `context` as its currentLoadContext(). */
export function runInLoadContext<T>(context: LoadContext, fn: () => T): T {
  return loadContexts.run(context, fn);
}
