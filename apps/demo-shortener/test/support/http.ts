import { Agent, get } from 'node:http';
import { NestFastifyApplication } from '@nestjs/platform-fastify';

/** Starts the app on a free loopback port and returns its base URL. */
export async function listen(app: NestFastifyApplication): Promise<string> {
  await app.listen(0, '127.0.0.1');
  return (await app.getUrl()).replace('[::1]', '127.0.0.1');
}

export interface Answer {
  status: number;
  location?: string;
}

/** `n` GETs of `url` at once, each on its own connection; redirects are not followed. */
export async function concurrentGets(url: string, n: number): Promise<Answer[]> {
  const agent = new Agent({ keepAlive: false, maxSockets: n });
  try {
    return await Promise.all(
      Array.from(
        { length: n },
        () =>
          new Promise<Answer>((resolve, reject) => {
            const req = get(url, { agent }, (res) => {
              res.resume();
              res.on('end', () =>
                resolve({ status: res.statusCode ?? 0, location: res.headers.location }),
              );
            });
            req.on('error', reject);
          }),
      ),
    );
  } finally {
    agent.destroy();
  }
}
