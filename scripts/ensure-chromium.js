#!/usr/bin/env node
/*
 * Makes sure a Chromium for the browser tests exists, as scripts/with-redis.js does for
 * redis-server. Order: CHROMIUM_BIN, then chromium / chromium-browser / google-chrome on PATH.
 * When none is found and this runs as root on Debian/Ubuntu, installs the `chromium` package;
 * otherwise it says exactly what to install. Prints the path it found on stdout.
 */
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');

function log(msg) {
  process.stderr.write(`[ensure-chromium] ${msg}\n`);
}

function findChromium() {
  const fromEnv = process.env.CHROMIUM_BIN;
  if (fromEnv && fs.existsSync(fromEnv)) return fromEnv;
  for (const name of ['chromium', 'chromium-browser', 'google-chrome', 'google-chrome-stable']) {
    const found = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
    if (found.status === 0 && found.stdout.trim()) return found.stdout.trim();
  }
  return undefined;
}

function ensureChromium() {
  let bin = findChromium();
  if (bin) return bin;
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const hasApt = spawnSync('sh', ['-c', 'command -v apt-get']).status === 0;
  if (isRoot && hasApt) {
    log('chromium not found: installing the Debian package chromium (about 150 MB)');
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    let r = spawnSync('apt-get', ['install', '-y', '-qq', 'chromium'], { stdio: 'inherit', env });
    if (r.status !== 0) {
      spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
      r = spawnSync('apt-get', ['install', '-y', '-qq', 'chromium'], { stdio: 'inherit', env });
    }
    if (r.status === 0) bin = findChromium();
  }
  if (!bin) {
    log(
      'Chromium is needed for the browser tests and could not be installed automatically.\n' +
        '  Install it, then run again:\n' +
        '    Debian:  sudo apt-get install -y chromium\n' +
        '    Ubuntu:  sudo snap install chromium\n' +
        '    macOS:   brew install --cask chromium\n' +
        '  or point the tests at a Chromium/Chrome binary with CHROMIUM_BIN=/path/to/chrome',
    );
    process.exit(1);
  }
  return bin;
}

if (require.main === module) process.stdout.write(`${ensureChromium()}\n`);

module.exports = { findChromium, ensureChromium };
