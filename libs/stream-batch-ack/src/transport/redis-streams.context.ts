import { BaseRpcContext } from '@nestjs/microservices';

/** [stream, id, group, deliveries, consumer, fields] */
export type RedisStreamsContextArgs = [
  string,
  string,
  string,
  number,
  string,
  Record<string, string>,
];

/**
 * The context of one stream entry, injected with `@Ctx()`. The transport acknowledges the entry
 * after the handler succeeded; `skipAck()` leaves it pending instead (it is delivered again after
 * `claim.minIdleMs`).
 */
export class RedisStreamsContext extends BaseRpcContext<RedisStreamsContextArgs> {
  private ackSkipped = false;
  private failure: { error: unknown } | undefined;

  constructor(args: RedisStreamsContextArgs) {
    super(args);
  }

  /** The stream key (the pattern of the handler). */
  get stream(): string {
    return this.args[0];
  }
  /** The entry id, e.g. `1700000000000-0`. */
  get id(): string {
    return this.args[1];
  }
  get group(): string {
    return this.args[2];
  }
  /** How many times this entry was delivered to the group, this delivery included (1 = first). */
  get deliveries(): number {
    return this.args[3];
  }
  get consumer(): string {
    return this.args[4];
  }
  /** The raw fields of the entry. */
  get fields(): Record<string, string> {
    return this.args[5];
  }

  getStream(): string {
    return this.stream;
  }
  getId(): string {
    return this.id;
  }
  getGroup(): string {
    return this.group;
  }
  getDeliveries(): number {
    return this.deliveries;
  }
  getConsumer(): string {
    return this.consumer;
  }
  getFields(): Record<string, string> {
    return this.fields;
  }

  /** Leave this entry pending (not acknowledged, not dead-lettered) even if the handler succeeds. */
  skipAck(): void {
    this.ackSkipped = true;
  }
  isAckSkipped(): boolean {
    return this.ackSkipped;
  }

  /**
   * Records the original error of a failed handler, before Nest's exception filter replaces it
   * (the default RPC filter turns unknown errors into "Internal server error"). Done by
   * RedisStreamsErrorInterceptor and IdempotencyInterceptor; the dead-letter entry shows it.
   */
  setError(error: unknown): void {
    this.failure = { error };
  }
  getError(): unknown {
    return this.failure?.error;
  }
  hasError(): boolean {
    return this.failure !== undefined;
  }
}
