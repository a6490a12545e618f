import type { Attributes, Counter } from '@opentelemetry/api';
import type { Headers } from '../core/entry-codec';
import { loadOtelApi, OtelApi, OtelProbe } from './otel-api';
import { errorType } from './server-telemetry';
import * as N from './telemetry.names';
import { formatTraceparent, TRACEPARENT, TRACESTATE } from './trace-context';

/**
 * What a ClientRedisStreams records: `messaging.client.sent.messages`, and while a TracerProvider
 * is registered a PRODUCER span `send <stream>` per message whose context goes out in the
 * entry's `traceparent` / `tracestate` headers (unless the message already has a `traceparent`).
 */
export class ClientTelemetry {
  private readonly api: OtelApi | null;
  private readonly probe: OtelProbe | null;
  /** undefined: not looked up yet; null: no MeterProvider. */
  private sent: Counter | null | undefined;
  private readonly attrs = new Map<string, { ok: Attributes; span: Attributes }>();

  constructor() {
    this.api = loadOtelApi();
    this.probe = this.api ? new OtelProbe(this.api) : null;
  }

  /**
   * Runs `xadd` with the headers to write (the given ones, plus the trace context when traced),
   * counting the message and tracing the send. Without an SDK this is `xadd(headers)`.
   */
  send(
    stream: string,
    headers: Headers | undefined,
    xadd: (headers: Headers | undefined) => Promise<unknown>,
  ): Promise<unknown> {
    if (!this.probe) return xadd(headers);
    if (this.sent === undefined) this.bindMeter();
    const sent = this.sent;
    const tracer = this.probe.activeTracer();
    if (!sent && !tracer) return xadd(headers);
    const a = this.attributes(stream);
    const count = (error: unknown) =>
      sent?.add(1, error === undefined ? a.ok : { ...a.ok, [N.ATTR_ERROR_TYPE]: errorType(error) });
    if (!tracer)
      return xadd(headers).then(
        (id) => {
          count(undefined);
          return id;
        },
        (err: unknown) => {
          count(err);
          throw err;
        },
      );
    const api = this.api!;
    const parent = api.context.active();
    const span = tracer.startSpan(
      `send ${stream}`,
      { kind: api.SpanKind.PRODUCER, attributes: a.span },
      parent,
    );
    let out = headers;
    const sc = span.spanContext();
    if (api.isSpanContextValid(sc) && headers?.[TRACEPARENT] === undefined) {
      const traced: Record<string, string> = {
        ...headers,
        [TRACEPARENT]: formatTraceparent(sc.traceId, sc.spanId, sc.traceFlags),
      };
      const state = sc.traceState?.serialize();
      if (state) traced[TRACESTATE] = state;
      out = traced;
    }
    return api.context
      .with(api.trace.setSpan(parent, span), () => xadd(out))
      .then(
        (id) => {
          if (typeof id === 'string') span.setAttribute(N.ATTR_MESSAGE_ID, id);
          count(undefined);
          span.end();
          return id;
        },
        (err: unknown) => {
          count(err);
          span.setAttribute(N.ATTR_ERROR_TYPE, errorType(err));
          if (err instanceof Error) span.recordException(err);
          span.setStatus({ code: api.SpanStatusCode.ERROR, message: String(err) });
          span.end();
          throw err;
        },
      );
  }

  /** The counter from the MeterProvider registered at the first send. */
  private bindMeter(): void {
    const meter = this.probe!.meter();
    this.sent = meter
      ? meter.createCounter(N.METRIC.sent, {
          description: 'Messages appended to streams (XADD) by ClientRedisStreams.',
          unit: '{message}',
        })
      : null;
  }

  private attributes(stream: string) {
    let a = this.attrs.get(stream);
    if (!a) {
      const ok: Attributes = {
        [N.ATTR_SYSTEM]: N.SYSTEM,
        [N.ATTR_DESTINATION]: stream,
        [N.ATTR_OPERATION_NAME]: 'send',
        [N.ATTR_OPERATION_TYPE]: 'send',
      };
      a = { ok, span: ok };
      this.attrs.set(stream, a);
    }
    return a;
  }
}
