/*
 * The forked-worker helper: messages by type, and a worker's error or exit failing the waits at
 * once instead of at their timeout.
 */
import { join } from 'node:path';
import { Child, forkTs } from '../child';

type In = { type: 'ready' } | { type: 'pong'; n: number };
type Out = { type: 'ping'; n: number } | { type: 'stop' };

/** Far longer than any wait should take here: a wait that fails, fails for another reason. */
const LONG = 120_000;

describe('forkTs and Child', () => {
  const children: Child<In, Out>[] = [];
  const start = (mode: string) => {
    const file = join(__dirname, 'echo-worker.ts');
    const child = forkTs<In, Out>(`worker (${mode})`, file, { env: { CHILD_MODE: mode } });
    children.push(child);
    return child;
  };
  afterEach(async () => {
    await Promise.all(children.splice(0).map((c) => c.kill()));
  });

  it('runs a TypeScript worker and matches its answers by type', async () => {
    const child = start('echo');
    await child.waitFor('ready', LONG);
    child.send({ type: 'ping', n: 1 });
    child.send({ type: 'ping', n: 2 });
    expect((await child.waitFor('pong', LONG)).n).toBe(1);
    // An answer that came while nobody waited is kept for the next wait.
    expect((await child.waitFor('pong', LONG)).n).toBe(2);
    child.send({ type: 'stop' });
    await child.exited;
    expect(child.running).toBe(false);
  });

  it("rejects a wait with the worker's error, or when it exits with an error code", async () => {
    const broken = start('error').waitFor('ready', LONG);
    await expect(broken).rejects.toThrow(/worker \(error\): .*the loader broke/s);
    const crashed = start('crash').waitFor('ready', LONG);
    await expect(crashed).rejects.toThrow('worker (crash) exited with code 3');
  });
});
