import type { Clock } from './clock';
import { StampedeInvalidationError, StoreUnavailableError } from './errors';
import type { InvalidationMessage, InvalidationMode, StampedeStore } from './store';
import type { TagVersions } from './tag-versions';

/**
 * Deletes `key` in the store and tells the other instances: in one atomic step when the store
 * has `invalidate` (a delete carried out late is broadcast all the same), else a delete, then a
 * broadcast. A failure rejects with a StampedeInvalidationError that says whether it may still
 * happen.
 */
export async function invalidateInStore(store: StampedeStore, key: string): Promise<void> {
  try {
    if (store.invalidate) {
      await store.invalidate(key);
    } else {
      await store.delete(key);
      await store.broadcast?.({ keys: [key] });
    }
  } catch (err) {
    throw new StampedeInvalidationError(key, mayStillHappen(err), err);
  }
}

/**
 * Makes the value of `key` stale at `at` (soft expiry): kept for its grace from then, while
 * callers get it at once and one refresh runs; a value without grace is deleted (as by
 * `invalidateInStore`). The other instances drop it from their L1. In one atomic step when the
 * store has `expire`; else a read, a write back, then a broadcast. Rejects as `invalidateInStore`.
 */
export async function expireInStore(store: StampedeStore, key: string, at: number): Promise<void> {
  try {
    if (store.expire) return await store.expire(key, at);
    const envelope = await store.get(key);
    if (!envelope?.g) return await invalidateInStore(store, key);
    if (envelope.e > at) await store.set(key, { ...envelope, e: at }, envelope.g);
    await store.broadcast?.({ keys: [key] });
  } catch (err) {
    if (err instanceof StampedeInvalidationError) throw err;
    throw new StampedeInvalidationError(key, mayStillHappen(err), err);
  }
}

/**
 * Gives each of `tags` a new version and tells the other instances, tag by tag (on a Cluster each
 * tag lives on its own node): in one atomic step when the store has `invalidateTags`, else a
 * bump, then a broadcast; without a shared version, one from this process's clock. `apply` gets
 * each version the store confirmed. If a tag is not confirmed, rejects with a
 * StampedeInvalidationError naming those tags and saying whether they may still be invalidated.
 * With `mode` 'soft', the values stamped before turn stale rather than invalid.
 */
export async function invalidateTagsInStore(
  store: StampedeStore,
  tags: string[],
  known: TagVersions,
  clock: Clock,
  apply: (message: InvalidationMessage) => void,
  mode: InvalidationMode = 'hard',
): Promise<void> {
  const messageOf = (tag: string, version: number): InvalidationMessage =>
    mode === 'soft' ? { soft: { [tag]: version } } : { tags: { [tag]: version } };
  const invalidateTag = async (tag: string): Promise<void> => {
    // Above the version known here: a store whose clock went back still moves it on.
    const floor = known.next(tag);
    if (store.invalidateTags) {
      const [version] = await store.invalidateTags([tag], [floor], mode);
      apply(messageOf(tag, version));
      return;
    }
    const [version] = store.bumpTags
      ? await store.bumpTags([tag], [floor], mode)
      : [known.next(tag, clock.now())];
    apply(messageOf(tag, version));
    await store.broadcast?.(messageOf(tag, version));
  };
  const results = await Promise.allSettled(tags.map(invalidateTag));
  const failed = tags.filter((_, i) => results[i].status === 'rejected');
  if (failed.length === 0) return;
  const errors = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
  throw new StampedeInvalidationError(failed, errors.some(mayStillHappen), errors[0]);
}

/** Whether a failed store call may still be carried out (it was sent). */
function mayStillHappen(err: unknown): boolean {
  return err instanceof StoreUnavailableError ? err.maybeApplied : true;
}
