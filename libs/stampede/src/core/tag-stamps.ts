import type { Clock } from './clock';
import type { InvalidationBusWatch } from './invalidation-bus';
import type { MethodMetrics } from './metrics';
import { SingleFlight } from './single-flight';
import type { ValueStore } from './store';
import type { StoreGuard } from './store-guard';
import type { TagVersions } from './tag-versions';

/**
 * The versions of a call's tags when it starts (its stamp). A tag seen for the first time here is
 * read from the store once (and, while the bus is down, again once per `maxStaleMs`); when the
 * store fails, the versions known here are used.
 */
export class TagStamps {
  /** Tag versions being read from the store: one read per tag at a time. */
  private readonly fetches = new SingleFlight<void>();

  constructor(
    private readonly store: Pick<ValueStore, 'tagVersions' | 'tagStates'>,
    private readonly tags: TagVersions,
    private readonly bus: InvalidationBusWatch,
    private readonly guard: StoreGuard,
    private readonly clock: Clock,
  ) {}

  /** The stamp of `tags` when every version is known here (no store read, no promise), else undefined. */
  known(tags: string[]): Record<string, number> | undefined {
    if (this.tags.anyMissing(tags, this.bus.verifiedAfter(this.clock.now()))) return undefined;
    return this.tags.stamp(tags);
  }

  /**
   * With `fromStore`, every version is read from the store again, so that an invalidation done
   * just before on another instance counts even if its broadcast has not arrived yet.
   */
  async stamp(
    tags: string[],
    m: MethodMetrics,
    fromStore = false,
  ): Promise<Record<string, number>> {
    // Without versions in the store (a store of this process), what is known here is current.
    const shared = this.store.tagStates !== undefined || this.store.tagVersions !== undefined;
    const missing =
      fromStore && shared
        ? tags
        : this.tags.missing(tags, this.bus.verifiedAfter(this.clock.now()));
    if (missing.length > 0) {
      const wasDown = this.guard.down;
      try {
        await Promise.all(
          missing.map((tag) => this.fetches.run(tag, () => this.fetch(tag)).promise),
        );
        if (wasDown) this.guard.answered();
      } catch (err) {
        this.guard.failed(err, m, 'using the tag versions known here');
      }
    }
    return this.tags.stamp(tags);
  }

  /** Reads the versions of `tags` ahead of use; a failure is left for the calls to see. */
  async prefetch(tags: string[]): Promise<void> {
    await Promise.all(
      tags.map((tag) =>
        this.fetches.run(tag, () => this.fetch(tag)).promise.catch(() => undefined),
      ),
    );
  }

  private async fetch(tag: string): Promise<void> {
    const fetchedAt = this.clock.now();
    if (this.store.tagStates) {
      const [state] = await this.store.tagStates([tag], [this.tags.next(tag)]);
      this.tags.learn(tag, state.version, fetchedAt, state.hardFloor);
      return;
    }
    const [version] = this.store.tagVersions
      ? await this.store.tagVersions([tag], [this.tags.next(tag)])
      : [this.tags.next(tag, fetchedAt)];
    this.tags.learn(tag, version, fetchedAt);
  }
}
