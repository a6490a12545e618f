#!/usr/bin/env node
/*
 * Renders docs/grafana/nest-redis-resilience.json against the running demo, without Grafana:
 *   1. starts `npm run demo`'s script (both apps and the collector) on free ports,
 *   2. starts a local Prometheus (Debian package `prometheus`) scraping both /metrics every 2 s,
 *   3. sends redirects to the shortener for DURATION_S seconds (default 120),
 *   4. runs every panel's PromQL through Prometheus' query_range API, as Grafana would,
 *   5. draws the panels with uPlot in headless Chromium, laid out by the dashboard's gridPos,
 *      and saves docs/grafana-dashboard.png.
 * The picture is this script's drawing of the dashboard's own queries over real scraped data;
 * it is not a Grafana screenshot.
 *
 * Usage: node scripts/with-redis.js node scripts/render-dashboard.js   (npm run dashboard:render)
 */
/* global URLSearchParams, window */
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const dashboardFile = path.join(root, 'docs', 'grafana', 'nest-redis-resilience.json');
const outFile = process.env.OUT ?? path.join(root, 'docs', 'grafana-dashboard.png');
const durationS = Number(process.env.DURATION_S ?? 120);
const say = (line) => process.stdout.write(`[render-dashboard] ${line}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function findPrometheus() {
  const found = spawnSync('sh', ['-c', 'command -v prometheus'], { encoding: 'utf8' });
  return found.status === 0 ? found.stdout.trim() : '';
}

function ensurePrometheus() {
  if (findPrometheus()) return findPrometheus();
  if (process.getuid?.() === 0 && spawnSync('sh', ['-c', 'command -v apt-get']).status === 0) {
    say('prometheus not found: installing the Debian package prometheus');
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    spawnSync('apt-get', ['install', '-y', '-qq', 'prometheus'], { stdio: 'inherit', env });
  }
  if (findPrometheus()) return findPrometheus();
  throw new Error('prometheus is not installed: sudo apt-get install -y prometheus');
}

async function startDemo(shortenerPort, ticksPort) {
  const child = spawn(process.execPath, [path.join(__dirname, 'demo.js')], {
    cwd: root,
    env: { ...process.env, SHORTENER_PORT: String(shortenerPort), TICKS_PORT: String(ticksPort) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d.toString();
      if (out.includes('Demo ready')) resolve();
    });
    child.on('exit', (code) => reject(new Error(`the demo exited (${code}) before it was ready`)));
  });
  child.stdout.resume();
  return child;
}

async function startPrometheus(bin, dir, port, targets) {
  const config = [
    'global:',
    '  scrape_interval: 2s',
    'scrape_configs:',
    ...targets.map(
      ([job, target]) =>
        `  - job_name: ${job}\n    static_configs:\n      - targets: ['${target}']`,
    ),
  ].join('\n');
  fs.writeFileSync(path.join(dir, 'prometheus.yml'), config);
  // prettier-ignore
  const child = spawn(bin, [
    `--config.file=${path.join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(dir, 'data')}`,
    `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn',
  ], { stdio: 'ignore' });
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/-/ready`)).ok) return child;
    } catch {
      /* not yet */
    }
    await sleep(100);
  }
  child.kill('SIGKILL');
  throw new Error('prometheus did not become ready');
}

/** Redirects with a skewed popularity (a few hot codes), as a short link service sees them. */
async function driveShortener(base, seconds) {
  const codes = [];
  for (let i = 0; i < 50; i++) {
    const res = await fetch(`${base}/urls`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ url: `https://example.com/article/${i}` }),
    });
    codes.push((await res.json()).code);
  }
  const end = Date.now() + seconds * 1000;
  const worker = async () => {
    while (Date.now() < end) {
      const code = codes[Math.min(codes.length - 1, Math.floor(Math.random() ** 3 * codes.length))];
      await fetch(`${base}/${code}`, { redirect: 'manual' }).catch(() => undefined);
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
}

function expand(expr) {
  return expr
    .replaceAll('$__rate_interval', '20s')
    .replaceAll('$__interval', '4s')
    .replaceAll('$__range', `${durationS}s`);
}

async function queryPanels(promUrl, dashboard, start, end) {
  const panels = [];
  for (const panel of dashboard.panels) {
    if (panel.type === 'row') {
      panels.push({ type: 'row', title: panel.title, gridPos: panel.gridPos });
      continue;
    }
    const series = [];
    for (const target of panel.targets ?? []) {
      const params = new URLSearchParams({
        query: expand(target.expr),
        start: String(start),
        end: String(end),
        step: '4',
      });
      const body = await (await fetch(`${promUrl}/api/v1/query_range?${params}`)).json();
      if (body.status !== 'success') throw new Error(`${panel.title}: ${body.error}`);
      for (const r of body.data.result) {
        const legend = (target.legendFormat ?? '').replace(
          /\{\{\s*([\w.]+)\s*\}\}/g,
          (_, k) => r.metric[k] ?? '',
        );
        series.push({
          name: legend || target.expr,
          values: r.values.map(([t, v]) => [t, Number(v)]),
        });
      }
    }
    panels.push({
      type: panel.type,
      title: panel.title,
      unit: panel.fieldConfig?.defaults?.unit ?? 'short',
      gridPos: panel.gridPos,
      series,
    });
  }
  return panels;
}

async function render(panels, title, subtitle) {
  const { chromium } = require('playwright-core');
  const { findChromium } = require('./ensure-chromium.js');
  const browser = await chromium.launch({
    executablePath: findChromium(),
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic'],
  });
  try {
    const rows = Math.max(...panels.map((p) => p.gridPos.y + p.gridPos.h));
    const page = await browser.newPage({ viewport: { width: 1600, height: rows * 34 + 90 } });
    await page.setContent(
      `<!doctype html><html><body><header></header><main></main></body></html>`,
    );
    await page.addStyleTag({ path: require.resolve('uplot/dist/uPlot.min.css') });
    await page.addStyleTag({ path: path.join(__dirname, 'render-dashboard.css') });
    await page.addScriptTag({ path: require.resolve('uplot/dist/uPlot.iife.min.js') });
    await page.addScriptTag({ path: path.join(__dirname, 'render-dashboard.page.js') });
    await page.evaluate(([p, t, s]) => window.drawDashboard(p, t, s), [panels, title, subtitle]);
    await page.screenshot({ path: outFile, fullPage: true });
  } finally {
    await browser.close();
  }
}

async function main() {
  const dashboard = JSON.parse(fs.readFileSync(dashboardFile, 'utf8'));
  const prometheus = ensurePrometheus();
  const [shortenerPort, ticksPort, promPort] = [
    await freePort(),
    await freePort(),
    await freePort(),
  ];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'render-dashboard-'));
  const children = [];
  const stop = async () => {
    for (const child of children.reverse()) {
      if (child.exitCode !== null) continue;
      child.kill('SIGINT');
      await Promise.race([new Promise((r) => child.once('exit', r)), sleep(8000)]);
      if (child.exitCode === null) child.kill('SIGKILL');
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    say('starting the demo');
    children.push(await startDemo(shortenerPort, ticksPort));
    children.push(
      await startPrometheus(prometheus, dir, promPort, [
        ['demo-shortener', `127.0.0.1:${shortenerPort}`],
        ['demo-ticks', `127.0.0.1:${ticksPort}`],
      ]),
    );
    const start = Math.floor(Date.now() / 1000);
    say(`scraping both apps every 2 s; driving redirects for ${durationS} s`);
    await driveShortener(`http://127.0.0.1:${shortenerPort}`, durationS);
    await sleep(4000);
    const end = Math.floor(Date.now() / 1000);
    const panels = await queryPanels(`http://127.0.0.1:${promPort}`, dashboard, start, end);
    const versions = `Prometheus ${spawnSync(prometheus, ['--version'], { encoding: 'utf8' }).stdout.split('\n')[0].split(' ')[2]}, Node ${process.version}`;
    await render(
      panels,
      dashboard.title,
      `${durationS} s of the demo (npm run demo, 16 concurrent redirect loops). Drawn by scripts/render-dashboard.js from the dashboard's own PromQL over data scraped by ${versions}; not a Grafana screenshot.`,
    );
    say(`wrote ${path.relative(root, outFile)}`);
  } finally {
    await stop();
  }
}

main().catch((err) => {
  process.stderr.write(`[render-dashboard] ${err.stack ?? err}\n`);
  process.exit(1);
});
