/*
 * The demo launchers' child processes: an app started with node, its output prefixed with its
 * name, and the wait for an HTTP readiness endpoint. Used by scripts/demo.js and demo-cluster.js.
 */
const { spawn } = require('node:child_process');
const { root, entryArgs } = require('./build-if-stale');

/**
 * Starts app `app` (a key of ENTRIES) as `name`, its lines printed as `[name] ...`;
 * `onExit(code, signal)` runs when it exits.
 */
function launchApp(name, app, { env, fromSource, onExit }) {
  const child = spawn(process.execPath, entryArgs(app, fromSource), {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  for (const stream of [child.stdout, child.stderr]) {
    let buffered = '';
    stream.on('data', (chunk) => {
      buffered += chunk;
      const lines = buffered.split('\n');
      buffered = lines.pop();
      for (const line of lines) process.stdout.write(`[${name}] ${line}\n`);
    });
  }
  child.on('exit', (code, signal) => {
    process.stdout.write(`[${name}] exited (${signal ?? code})\n`);
    onExit(code, signal);
  });
  return child;
}

/** Resolves once `url` answers 200; rejects after `timeoutMs`, or when `stopped()` turns true. */
async function waitReady(url, timeoutMs, stopped) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    if (stopped()) throw new Error('stopped');
    if (Date.now() > deadline) throw new Error(`${url} did not answer 200 within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

module.exports = { launchApp, waitReady };
