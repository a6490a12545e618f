/*
 * One forked instance of the benchmark app (--instances K). Config comes in BENCH_CONFIG; the
 * parent sends { type: 'round', req } and gets { type: 'round', result }, { type: 'load', job }
 * and gets { type: 'load', result }, or { type: 'exit' }.
 */
import { BenchApp } from './bench-app';
import { BenchConfig } from './patterns';
import { runCliffRound, WorkerCommand } from './instances';
import { runLoad } from './load';
import { failToParent } from '../shared/child';

async function main(): Promise<void> {
  const cfg = JSON.parse(process.env.BENCH_CONFIG!) as BenchConfig;
  const app = await BenchApp.create(cfg);
  process.on('message', (msg: WorkerCommand) => {
    if (msg.type === 'exit') {
      void app.close().then(() => process.disconnect());
      return;
    }
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
