/*
 * Builds the packages and the apps (npm run build) when a built entry point is missing or older
 * than the newest source (TypeScript, the pages' files); used by scripts/demo.js and scripts/demo-cluster.js.
 */
const { spawnSync } = require('node:child_process');
const { existsSync, readdirSync, statSync } = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..', '..');

/** Where each app's entry point is, from the sources and once built. */
const ENTRIES = {
  shortener: ['apps/demo-shortener/src/main.ts', 'dist/apps/demo-shortener/main.js'],
  ticks: ['apps/demo-ticks/src/main.ts', 'dist/apps/demo-ticks/main.js'],
  collector: ['apps/demo-ticks/src/collector.main.ts', 'dist/apps/demo-ticks/collector.main.js'],
};

/** Newest modification time of the sources below `dir`: TypeScript and the pages' files. */
function newestSource(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(file));
    else if (/\.(ts|html|css|js|svg)$/.test(entry.name))
      newest = Math.max(newest, statSync(file).mtimeMs);
  }
  return newest;
}

/** Runs `npm run build` when needed; returns false when the build failed. */
function buildIfStale(say) {
  const built = Object.values(ENTRIES).map(([, out]) => path.join(root, out));
  built.push(
    ...['stampede', 'stream-batch-ack'].map((p) => path.join(root, 'libs', p, 'dist', 'index.js')),
  );
  const sources = ['apps', 'libs/common/src', 'libs/stampede/src', 'libs/stream-batch-ack/src'].map(
    (d) => newestSource(path.join(root, d)),
  );
  const stale = built.some((f) => !existsSync(f) || statSync(f).mtimeMs < Math.max(...sources));
  if (!stale) return true;
  say('building the packages and apps once (npm run build)...');
  return spawnSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit' }).status === 0;
}

/** The node arguments that run app `name`: its built entry, or its source with the TS loader. */
function entryArgs(name, fromSource) {
  const [source, built] = ENTRIES[name];
  return fromSource
    ? ['-r', path.join(root, 'scripts', 'register-ts.js'), path.join(root, source)]
    : [path.join(root, built)];
}

module.exports = { root, ENTRIES, buildIfStale, entryArgs };
