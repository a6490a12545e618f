/* A worker for child.e2e-spec.ts, by CHILD_MODE: echo (ready, then pong per ping), error, crash. */
import { failToParent, toParent } from '../child';

const mode = process.env.CHILD_MODE;
if (mode === 'error') failToParent(new Error('the loader broke'));
else if (mode === 'crash') process.exit(3);
else {
  process.on('message', (msg: { type: string; n?: number }) => {
    if (msg.type === 'ping') toParent({ type: 'pong', n: msg.n } as { type: string });
    if (msg.type === 'stop') process.disconnect();
  });
  toParent({ type: 'ready' });
}
