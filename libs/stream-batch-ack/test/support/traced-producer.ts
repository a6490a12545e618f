/*
 * A producer process with a tracer provider, for the cross-process trace test. Run with:
 *   node --require scripts/register-ts.js traced-producer.ts
 * Env: REDIS_URL, STREAM. Emits one message inside a span, then sends over IPC
 * { traceId, parentSpanId (the app's span), sendSpanId (the PRODUCER span), entryId } and exits.
 */
import 'reflect-metadata';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { lastValueFrom } from 'rxjs';
import { ClientRedisStreams } from '@nest-redis-resilience/stream-batch-ack';

async function main(): Promise<void> {
  const exporter = new InMemorySpanExporter();
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
  );
  const client = new ClientRedisStreams({ connection: process.env.REDIS_URL! });
  await client.connect();
  const stream = process.env.STREAM!;
  const entryId = await trace
    .getTracer('traced-producer')
    .startActiveSpan('place order', async (span) => {
      try {
        return (await lastValueFrom(client.emit(stream, { order: 1 }))) as string;
      } finally {
        span.end();
      }
    });
  await client.close();
  const spans = exporter.getFinishedSpans();
  const parent = spans.find((s) => s.name === 'place order')!;
  const send = spans.find((s) => s.name === `send ${stream}`)!;
  process.send!({
    traceId: parent.spanContext().traceId,
    parentSpanId: parent.spanContext().spanId,
    sendSpanId: send.spanContext().spanId,
    sendParentSpanId: send.parentSpanContext?.spanId,
    sendKind: send.kind,
    entryId,
  });
  process.disconnect();
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
  process.disconnect?.();
});
