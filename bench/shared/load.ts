/* Load by autocannon: the shortener's redirects and creations, and the cluster benchmark's. */
import autocannon from 'autocannon';
import { quantile } from './table';

export type LoadResult = Awaited<ReturnType<typeof runLoad>>;

export interface LoadOptions {
  url: string;
  connections: number;
  durationS: number;
  expectStatus: number;
  /** Paths cycled through by each connection. */
  paths?: string[];
  method?: 'GET' | 'POST';
  /** POST body; `[<id>]` is replaced by a fresh value per request. */
  body?: string;
}

/**
 * One autocannon run. Latencies come from every response (autocannon's own histogram records
 * only 2xx, and redirects are 3xx), in ms; p95 is nearest-rank over all of them.
 */
export async function runLoad(options: LoadOptions) {
  const latencies: number[] = [];
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const request: autocannon.Options = {
      ...{ url: options.url, connections: options.connections, duration: options.durationS },
      ...{ method: options.method ?? 'GET', timeout: 10 },
    };
    // autocannon treats a key set to undefined as given: only set what is used.
    const body = options.body;
    if (body) {
      // Not autocannon's idReplacement: its Content-Length assumes an id length that hyperid
      // does not always produce, and the server then waits for the missing bytes.
      let n = 0;
      request.headers = { 'content-type': 'application/json' };
      const setupRequest = (req: object) => ({
        ...req,
        body: body.replace('[<id>]', `${Date.now()}-${n++}`),
      });
      request.requests = [{ setupRequest }];
    } else if (options.paths) request.requests = options.paths.map((path) => ({ path }));
    const instance = autocannon(request, (err, res) => (err ? reject(err) : resolve(res)));
    instance.on('response', (_client, _status, _bytes, ms) => latencies.push(ms));
  });
  latencies.sort((a, b) => a - b);
  const statuses: Record<string, number> = {};
  for (const [status, { count }] of Object.entries(result.statusCodeStats ?? {}))
    statuses[status] = count ?? 0;
  const q = (p: number) => quantile(latencies, p);
  return {
    connections: options.connections,
    durationS: result.duration,
    requests: latencies.length,
    rps: latencies.length / result.duration,
    ...{ p50: q(0.5), p95: q(0.95), p99: q(0.99), max: latencies[latencies.length - 1] ?? NaN },
    /** Responses by status code. */
    statuses,
    ...{ errors: result.errors, timeouts: result.timeouts },
    /** Responses with a status other than `expectStatus`. */
    unexpected: latencies.length - (statuses[String(options.expectStatus)] ?? 0),
  };
}
