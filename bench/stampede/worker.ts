/*
 * One forked instance of the benchmark app (instances.ts). Config comes in BENCH_CONFIG; it
 * answers a round or a load command with its result, and exits on { type: 'exit' }.
 */
import { BenchApp } from './bench-app';
import { BenchConfig } from './patterns';
import { runCliffRound, WorkerCommand } from './instances';
import { runLoad } from './load';
import { failToParent } from '../shared/child';

async function main(): Promise<void> {
  const app = await BenchApp.create(JSON.parse(process.env.BENCH_CONFIG!) as BenchConfig);
  process.on('message', (msg: WorkerCommand) => {
    if (msg.type === 'exit') return void app.close().then(() => process.disconnect());
    const work =
      msg.type === 'load'
        ? runLoad(app, msg.job).then((result) => ({ type: 'load', result }))
        : runCliffRound(app, msg.req).then((result) => ({ type: 'round', result }));
    work.then(
      (reply) => process.send!(reply),
      (err: unknown) => process.send!({ type: 'error', error: String(err) }),
    );
  });
  process.send!({ type: 'ready' });
}

main().catch(failToParent);
