#!/usr/bin/env node
/*
 * Run after `npm install` / `npm ci` (postinstall). The npm scripts run on the Node 24 of the
 * optional dependency node-<platform>-<arch> (see scripts/jest.js), but npm builds native addons
 * (better-sqlite3) for the Node that runs npm. When that build does not load on the Node 24, it is
 * built again against the headers that package ships, so no download is needed.
 */
const { execFileSync, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const nodeDir = path.join(root, 'node_modules', `node-${process.platform}-${process.arch}`);
const node = path.join(nodeDir, 'bin', 'node');
const ADDONS = ['better-sqlite3'];

function loads(addon) {
  const probe = `new (require(${JSON.stringify(addon)}))(':memory:').close()`;
  const r = spawnSync(node, ['-e', probe], { cwd: root, stdio: 'ignore' });
  return r.status === 0;
}

if (!fs.existsSync(node)) process.exit(0); // no bundled Node here: the tests use the system's
const stale = ADDONS.filter((addon) =>
  fs.existsSync(path.join(root, 'node_modules', addon)),
).filter((addon) => !loads(addon));
if (stale.length === 0) process.exit(0);

console.log(`[rebuild-native] building ${stale.join(', ')} for the Node 24 of ${nodeDir}`);
execFileSync('npm', ['rebuild', ...stale], {
  cwd: root,
  stdio: 'inherit',
  env: {
    ...process.env,
    PATH: `${path.dirname(node)}${path.delimiter}${process.env.PATH}`,
    npm_config_nodedir: nodeDir,
  },
});
const still = stale.filter((addon) => !loads(addon));
if (still.length > 0) {
  console.error(`[rebuild-native] ${still.join(', ')} still does not load on ${node}`);
  process.exit(1);
}
