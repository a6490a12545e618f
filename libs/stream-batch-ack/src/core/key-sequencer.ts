/** What became of an entry after its run. */
export type SequencedFate =
  /** Finished: acknowledged, dead-lettered, or left pending on purpose. */
  | 'done'
  /** Failed, and waits for its retry: later entries of its key wait for it. */
  | 'retry'
  /** Not finished, not failed: it runs again after the entry of its key that failed before it. */
  | 'held';

interface Chain<E> {
  /** Entries of the key in a run now. */
  running: number;
  /** The id of the entry of the key that failed and waits for its retry. */
  blockedBy?: string;
  /** Entries of the key that wait their turn, in id order. */
  queue: E[];
}

/**
 * Per-key order within one partition: the entries of a key run in id order and never at the same
 * time, and a failed entry holds back the later entries of its key (not of other keys) until it
 * is done (it succeeded, or was dead-lettered). Entries without a key are not ordered.
 *
 * One entry of a key runs at a time for per-entry handlers; a batch handler takes every entry of
 * a free key that arrived together (in order). Pure bookkeeping: the caller runs the entries.
 */
export class KeySequencer<E extends { id: string }> {
  private readonly chains = new Map<string, Chain<E>>();
  private held = 0;

  constructor(
    private readonly keyOf: (entry: E) => string | undefined,
    private readonly batch: boolean,
  ) {}

  /** Entries waiting here for their turn. */
  get waiting(): number {
    return this.held;
  }

  /** Takes delivered entries (in id order); returns those that may run now, keeps the others. */
  admit(entries: readonly E[]): E[] {
    const runnable: E[] = [];
    const opened = this.batch ? new Set<string>() : undefined;
    for (const entry of entries) {
      const key = this.keyOf(entry);
      if (key === undefined) {
        runnable.push(entry);
        continue;
      }
      const chain = this.chains.get(key);
      if (!chain) {
        this.chains.set(key, { running: 1, queue: [] });
        opened?.add(key);
        runnable.push(entry);
      } else if (chain.blockedBy === entry.id) {
        // The failed entry is back for its retry: it goes first.
        chain.blockedBy = undefined;
        chain.running++;
        runnable.push(entry);
      } else if (opened?.has(key)) {
        chain.running++;
        runnable.push(entry);
      } else {
        chain.queue.push(entry);
        this.held++;
      }
    }
    return runnable;
  }

  /**
   * After a run of `ran` (in id order): records each entry's fate, and returns the entries whose
   * turn has come (their key is free again).
   */
  settle(ran: readonly E[], fateOf: (entry: E) => SequencedFate): E[] {
    const heldBack = new Map<string, E[]>();
    for (const entry of ran) {
      const key = this.keyOf(entry);
      if (key === undefined) continue;
      const chain = this.chains.get(key);
      if (!chain) continue; // dropped meanwhile (the partition was given up)
      chain.running--;
      const fate = fateOf(entry);
      if (fate === 'retry') chain.blockedBy ??= entry.id;
      else if (fate === 'held') {
        const list = heldBack.get(key);
        if (list) list.push(entry);
        else heldBack.set(key, [entry]);
      }
    }
    for (const [key, list] of heldBack) {
      const chain = this.chains.get(key)!;
      chain.queue = list.concat(chain.queue);
      this.held += list.length;
    }
    const next: E[] = [];
    const touched = new Set<string>();
    for (const entry of ran) {
      const key = this.keyOf(entry);
      if (key === undefined || touched.has(key)) continue;
      touched.add(key);
      const chain = this.chains.get(key);
      if (!chain || chain.running > 0 || chain.blockedBy !== undefined) continue;
      if (chain.queue.length === 0) {
        this.chains.delete(key);
        continue;
      }
      const turn = this.batch ? chain.queue.splice(0) : chain.queue.splice(0, 1);
      chain.running += turn.length;
      this.held -= turn.length;
      next.push(...turn);
    }
    return next;
  }

  /** Forgets every key; returns the entries that were waiting (they stay pending in Redis). */
  drop(): E[] {
    const out: E[] = [];
    for (const chain of this.chains.values()) out.push(...chain.queue);
    this.chains.clear();
    this.held = 0;
    return out;
  }
}
