import { createServer, connect, Server, Socket } from 'node:net';

/**
 * A TCP proxy in front of a Redis server that counts round trips: a turn starts when a
 * connection sends after its last reply (or first), so pipelined commands count once. Tests and
 * benchmarks use it to see how many times a caller waits on the network, which INFO commandstats
 * cannot tell.
 */
export class RoundTripProxy {
  /** Round trips since start (or the last reset), over every connection through the proxy. */
  turns = 0;
  private readonly sockets = new Set<Socket>();

  private readonly server: Server;
  private port = 0;

  private constructor(targetPort: number, targetHost: string) {
    this.server = createServer((client) => this.relay(client, targetPort, targetHost));
  }

  static async start(targetPort: number, targetHost = '127.0.0.1'): Promise<RoundTripProxy> {
    const proxy = new RoundTripProxy(targetPort, targetHost);
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    const address = proxy.server.address();
    if (!address || typeof address === 'string') throw new Error('proxy has no port');
    proxy.port = address.port;
    return proxy;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  reset(): void {
    this.turns = 0;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private relay(client: Socket, port: number, host: string): void {
    const upstream = connect(port, host);
    this.sockets.add(client).add(upstream);
    let awaitingReply = false;
    client.on('data', (chunk) => {
      if (!awaitingReply) {
        this.turns++;
        awaitingReply = true;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      awaitingReply = false;
      client.write(chunk);
    });
    const close = () => {
      client.destroy();
      upstream.destroy();
      this.sockets.delete(client);
      this.sockets.delete(upstream);
    };
    client.on('close', close).on('error', close);
    upstream.on('close', close).on('error', close);
  }
}
