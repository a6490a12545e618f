import { StampedeInvalidationError, StoreUnavailableError } from './errors';
import type { StampedeStore } from './store';

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
    const pending = err instanceof StoreUnavailableError ? err.maybeApplied : true;
    throw new StampedeInvalidationError(key, pending, err);
  }
}
