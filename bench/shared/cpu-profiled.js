/*
 * Runs a Node entry file (a demo app, a benchmark server) under the V8 CPU profiler, driven by its parent
 * over IPC: `{ cpuProfileStart: true }` starts sampling, `{ cpuProfile: '<file>' }` stops it and
 * writes the .cpuprofile (answering `{ cpuProfileWritten }`). Needed because Nest's shutdown hooks
 * end the process with the signal, so `node --cpu-prof` would write nothing; and it lets the
 * benchmark profile only the publishing period. Plain JavaScript, so that it adds no TypeScript
 * compiler to a built app.
 *   fork('bench/shared/cpu-profiled.js', ['<entry.js>'])
 */
'use strict';
const inspector = require('node:inspector');
const { writeFileSync } = require('node:fs');
const path = require('node:path');

const entry = process.argv[2];
if (!entry) {
  process.stderr.write('usage: node cpu-profiled.js <entry file>\n');
  process.exit(2);
}
process.argv.splice(2, 1);

const session = new inspector.Session();
session.connect();
const post = (method, params) =>
  new Promise((resolve, reject) =>
    session.post(method, params ?? {}, (err, result) => (err ? reject(err) : resolve(result))),
  );

const ready = post('Profiler.enable').then(() =>
  post('Profiler.setSamplingInterval', { interval: 500 }),
);
let started = Promise.reject(new Error('the profiler was not started'));
started.catch(() => undefined);

process.on('message', (msg) => {
  if (msg && msg.cpuProfileStart === true) {
    started = ready.then(() => post('Profiler.start'));
    return;
  }
  if (!msg || typeof msg.cpuProfile !== 'string') return;
  started
    .then(() => post('Profiler.stop'))
    .then(({ profile }) => {
      writeFileSync(msg.cpuProfile, JSON.stringify(profile));
      process.send?.({ cpuProfileWritten: msg.cpuProfile });
    })
    .catch((err) => process.send?.({ cpuProfileError: String(err?.stack ?? err) }));
});

ready.then(
  () => require(path.resolve(entry)),
  (err) => {
    process.stderr.write(`cpu-profiled: ${err?.stack ?? err}\n`);
    process.exit(1);
  },
);
