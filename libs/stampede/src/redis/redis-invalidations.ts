import type { Envelope, EnvelopeCodec } from '../core/envelope';
import type { InvalidationMessage, InvalidationMode, TagState } from '../core/store';
import type { StampedeKeys } from './keys';
import type { RedisBus } from './redis-bus';
import type { RedisClient } from './redis-connection';
import { decodeStored } from './value-lock';
import {
  INVALIDATE,
  REPLACE,
  SOFT_EXPIRE,
  TAG_BUMP,
  TAG_SOFT_BUMP,
  TAG_STATE,
  TAG_VERSION,
} from './scripts';

export type ScriptClient = RedisClient &
  Record<string, (...args: (string | number)[]) => Promise<unknown>>;

/** Runs a command through the store's guard; `onAbandoned` gets a reply that came too late. */
export type GuardedCall = <T>(op: () => Promise<T>, onAbandoned?: (late: T) => void) => Promise<T>;

/** Tries of a soft expiry whose value keeps changing under it before it is deleted instead. */
const EXPIRE_TRIES = 3;

/**
 * The Redis side of invalidations: tag versions (hard and soft), and the writes that tell the
 * other instances in the same script (invalidate, replace, soft expiry), so that one carried out
 * after the call gave up is broadcast all the same, and applied here too (this process skips its
 * own messages). On a Cluster each script touches one slot: a value's, or a tag's.
 */
export class RedisInvalidations {
  private readonly scripts: ScriptClient;

  constructor(
    client: RedisClient,
    private readonly keys: StampedeKeys,
    private readonly bus: RedisBus,
    private readonly codec: EnvelopeCodec,
    private readonly call: GuardedCall,
  ) {
    this.scripts = client as ScriptClient;
  }

  /** DEL (of a value, not of a lock mark) and PUBLISH in one script. */
  async invalidate(key: string): Promise<void> {
    const message: InvalidationMessage = { keys: [key] };
    await this.call(
      () =>
        this.scripts[INVALIDATE.name](this.keys.value(key), this.keys.bus, this.bus.text(message)),
      () => this.bus.deliver(message),
    );
  }

  /** SET and PUBLISH in one script. */
  async replace(key: string, envelope: Envelope, ttlMs: number, raw?: string): Promise<void> {
    const message: InvalidationMessage = { keys: [key] };
    const text = raw ?? this.codec.encode(envelope);
    await this.call(
      () =>
        this.scripts[REPLACE.name](
          this.keys.value(key),
          text,
          ttlMs,
          this.keys.bus,
          this.bus.text(message),
        ),
      () => this.bus.deliver(message),
    );
  }

  /**
   * Reads the value, and writes it back stale at `at` (kept for its grace) only if it has not
   * changed since, with the broadcast, in one script. A value without grace is deleted.
   */
  async expire(key: string, at: number): Promise<void> {
    const message: InvalidationMessage = { keys: [key] };
    for (let tries = 0; tries < EXPIRE_TRIES; tries++) {
      const raw = await this.call(() => this.scripts.get(this.keys.value(key)));
      const envelope = decodeStored(this.codec, raw);
      if (!envelope?.g || raw === null) return this.invalidate(key);
      if (envelope.e <= at) return; // already stale: the other instances see it so too
      const stale = this.codec.encode({
        v: envelope.v,
        d: envelope.d,
        e: at,
        t: envelope.t,
        g: envelope.g,
      });
      const written = await this.call(
        () =>
          this.scripts[SOFT_EXPIRE.name](
            this.keys.value(key),
            raw,
            stale,
            envelope.g!,
            this.keys.bus,
            this.bus.text(message),
          ),
        (late) => {
          if (late === 1) this.bus.deliver(message);
        },
      );
      if (written === 1) return;
    }
    // Refilled under us each time: a new value anyway, drop it.
    return this.invalidate(key);
  }

  tagVersions(tags: string[], floors: number[]): Promise<number[]> {
    return this.perTag(tags, async (tag, i) =>
      Number(await this.call(() => this.scripts[TAG_VERSION.name](this.keys.tag(tag), floors[i]))),
    );
  }

  tagStates(tags: string[], floors: number[]): Promise<TagState[]> {
    return this.perTag(tags, async (tag, i) => {
      const [version, hardFloor] = (await this.call(() =>
        this.scripts[TAG_STATE.name](this.keys.tag(tag), floors[i]),
      )) as [number, number];
      return { version: Number(version), hardFloor: Number(hardFloor) };
    });
  }

  bumpTags(tags: string[], floors: number[], mode: InvalidationMode = 'hard'): Promise<number[]> {
    const script = mode === 'soft' ? TAG_SOFT_BUMP : TAG_BUMP;
    return this.perTag(tags, async (tag, i) =>
      Number(await this.call(() => this.scripts[script.name](this.keys.tag(tag), floors[i]))),
    );
  }

  /** The tag's new version and its PUBLISH in one script per tag (on the tag's node). */
  invalidateTags(
    tags: string[],
    floors: number[],
    mode: InvalidationMode = 'hard',
  ): Promise<number[]> {
    const script = mode === 'soft' ? TAG_SOFT_BUMP : TAG_BUMP;
    const field = mode === 'soft' ? 'soft' : 'tags';
    return this.perTag(tags, async (tag, i) => {
      const version = await this.call(
        () =>
          this.scripts[script.name](
            this.keys.tag(tag),
            floors[i],
            this.keys.bus,
            this.bus.tagTextBefore(tag, field),
            '}}',
          ),
        (late) => this.bus.deliver({ [field]: { [tag]: Number(late) } }),
      );
      return Number(version);
    });
  }

  /** One script call per tag: tags live in different slots on a Cluster. */
  private perTag<R>(tags: string[], run: (tag: string, i: number) => Promise<R>): Promise<R[]> {
    return Promise.all(tags.map(run));
  }
}
