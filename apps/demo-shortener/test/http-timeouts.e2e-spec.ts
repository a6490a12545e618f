import { NestFastifyApplication } from '@nestjs/platform-fastify';
import { connect, Socket } from 'node:net';
import { CapturingLogger, closeAndDrop, runId, startApp, tempSqlite, waitFor } from './support/env';
import { listen } from './support/http';

/** The head of a POST /urls that announces a 100-byte body. */
const HEAD =
  'POST /urls HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
  'Content-Length: 100\r\n\r\n';

interface SlowClient {
  socket: Socket;
  /** Resolves with the ms from connect to close, and what the server wrote, once it closes. */
  closed: Promise<{ ms: number; received: string }>;
}

/**
 * A raw TCP client that sends the head and the first bytes of a body, then (if `trickleMs`)
 * one more byte every `trickleMs`, never finishing. It gives up on its own after `giveUpMs`,
 * so that a server that never closes fails the test instead of hanging it.
 */
function slowClient(base: string, trickleMs: number | undefined, giveUpMs: number): SlowClient {
  const { hostname, port } = new URL(base);
  const socket = connect(Number(port), hostname);
  const started = Date.now();
  let received = '';
  let trickle: NodeJS.Timeout | undefined;
  socket.on('connect', () => {
    socket.write(HEAD + '{"url": "https://exa');
    if (trickleMs) {
      trickle = setInterval(() => socket.write('m'), trickleMs);
    }
  });
  socket.on('data', (d) => (received += d.toString()));
  socket.on('error', () => undefined);
  const giveUp = setTimeout(() => socket.destroy(new Error('the server kept it open')), giveUpMs);
  const closed = new Promise<{ ms: number; received: string }>((resolve) =>
    socket.on('close', () => {
      clearInterval(trickle);
      clearTimeout(giveUp);
      resolve({ ms: Date.now() - started, received });
    }),
  );
  return { socket, closed };
}

/**
 * Clients that send headers and part of a body, then stall or trickle (slowloris): the server
 * closes them after HTTP_REQUEST_TIMEOUT instead of holding the connection, and a client that
 * goes away in the middle of a body is logged at debug level, not as an error with a stack.
 */
describe('shortener: slow and vanishing clients', () => {
  const id = runId('slow');
  const sqlite = tempSqlite(id);
  const logger = new CapturingLogger();
  let app: NestFastifyApplication;
  let base: string;

  beforeAll(async () => {
    app = await startApp(
      {
        DATABASE_URL: sqlite.url,
        DATABASE_TABLE: `slow_${id}`,
        CACHE_ENABLED: 'false',
        HTTP_REQUEST_TIMEOUT: '1s',
        // Longer than the test's bound: only the request timeout can close these connections.
        HTTP_CONNECTION_TIMEOUT: '60s',
      },
      { logger },
    );
    base = await listen(app);
  });

  afterAll(async () => {
    await closeAndDrop(app);
    sqlite.remove();
  });

  const errors = () => logger.entries.filter((e) => e.level === 'error');

  it('closes a connection that stalls in the middle of the body within the request timeout', async () => {
    const { closed } = slowClient(base, undefined, 15_000);
    const { ms, received } = await closed;
    expect(ms).toBeGreaterThanOrEqual(900);
    expect(ms).toBeLessThan(6000);
    // Answered (408 in the app's JSON error shape) before the close, when the socket allowed it.
    if (received) {
      expect(received).toMatch(/^HTTP\/1\.1 408 /);
      expect(received).toContain('"statusCode":408');
    }
  }, 30_000);

  it('closes a connection that trickles one byte at a time (slowloris) within the request timeout', async () => {
    const { closed } = slowClient(base, 200, 15_000);
    const { ms } = await closed;
    expect(ms).toBeLessThan(6000);
  }, 30_000);

  it('logs a client that disconnects in the middle of a body at debug level, not as an error', async () => {
    const before = logger.entries.length;
    const { socket, closed } = slowClient(base, undefined, 15_000);
    await new Promise((r) => socket.once('connect', r));
    // Let the server start reading the body, then go away.
    await new Promise((r) => setTimeout(r, 200));
    socket.destroy();
    await closed;
    expect(
      await waitFor(
        async () =>
          logger.entries.slice(before).some((e) => e.level === 'debug' && /abort/i.test(e.message)),
        5000,
      ),
    ).toBe(true);
    expect(errors()).toEqual([]);
  }, 30_000);

  it('still serves complete requests', async () => {
    const res = await fetch(`${base}/urls`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ url: 'https://example.com/complete' }),
    });
    expect(res.status).toBe(201);
    expect(errors()).toEqual([]);
  });
});
