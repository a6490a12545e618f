/*
 * The packages (the two libraries, and the common code that both depend on) as an app outside the
 * repository gets them: `npm pack` (prepack builds dist/), fresh apps in a temp directory that
 * install the tarballs and public registry packages only (no workspace link, no path mapping, no
 * --legacy-peer-deps), compiled by their own tsc in strict mode and run with node against the real
 * Redis, on NestJS 11 and 12, as ES modules and as CommonJS, on Node 20 (or 22) and on Node 24:
 *
 * | app | NestJS | module kind | tsconfig          | TypeScript | peers                                    | runs on | jest spec |
 * |-----|--------|-------------|-------------------|------------|------------------------------------------|---------|-----------|
 * | A   | 12     | ES module   | nodenext          | 6          | ioredis 6, terminus, cache-manager, OTel, platform-express | 20, 24 |   |
 * | B   | 11     | CommonJS    | commonjs + node10 | 5.9        | ioredis 5, no optional peer              | 20      | on 20     |
 * | C   | 12     | CommonJS    | nodenext          | 6          | as A                                     | 20, 24  | on 24     |
 * | D   | 11     | ES module   | nodenext          | 5.9        | as A                                     | 24      |           |
 *
 * Without terminus (B) the `/health` subpaths must fail with a message that says to install it.
 * The apps' sources are test/package/fixture/*.ts; each prints one JSON line of results and must
 * exit by itself (a leaked handle fails the test). The jest spec (fixture/app-e2e.ts) is what a
 * user writes in test/ of a new CommonJS project. Finally: what npm does with ioredis 4.
 */
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, lstatSync, readFileSync, realpathSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join, posix, relative, sep } from 'node:path';
import { Redis } from 'ioredis';
import { deleteKeys, REDIS_URL, uniquePrefix } from '../support/redis';

const root = join(__dirname, '..', '..');
const fixture = join(__dirname, 'fixture');

const CALLS = 1000; // per app instance (the stampede check runs two instances)
const MESSAGES = 1000;
const GROUP = 'outside-consumer';

/** The files a tarball may hold besides dist/, and must hold. */
const TOP_LEVEL_FILES = ['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md'];

/**
 * The reference pages a package ships beside its README (docs/ in the tarball): the README links
 * to them, so they must be readable where the package is installed.
 */
const DOCS_PAGES: Record<string, string[]> = {
  '@nest-redis-resilience/common': [],
  '@nest-redis-resilience/stampede': ['docs/http-routes.md', 'docs/telemetry.md'],
  '@nest-redis-resilience/stream-batch-ack': [
    'docs/dead-letters.md',
    'docs/options.md',
    'docs/telemetry.md',
  ],
};

/** The relative link targets of a Markdown file (outside code blocks), without their #fragment. */
function relativeLinks(markdown: string): string[] {
  const text = markdown.replace(/^ {0,3}(`{3,}|~{3,})[\s\S]*?^ {0,3}\1/gm, '');
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)]
    .map(([, link]) => link)
    .filter((link) => !/^[a-z][a-z0-9+.-]*:/i.test(link) && !link.startsWith('#'))
    .map((link) => link.split('#')[0]);
}

/** common first: the other two depend on it (and build it before themselves). */
const PACKAGES = [
  { name: '@nest-redis-resilience/common', dir: 'libs/common' },
  { name: '@nest-redis-resilience/stampede', dir: 'libs/stampede' },
  { name: '@nest-redis-resilience/stream-batch-ack', dir: 'libs/stream-batch-ack' },
] as const;
type PackageName = (typeof PACKAGES)[number]['name'];

interface PackageJson {
  name: string;
  version: string;
  main?: string;
  types?: string;
  exports?: Record<string, string | Record<string, string>>;
  typesVersions?: Record<string, Record<string, string[]>>;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

interface Packed {
  packageJson: PackageJson;
  tarball: string;
  /** Paths in the tarball, from `npm pack --json` (the real pack). */
  packed: string[];
  /** Paths from `npm pack --dry-run --json`. */
  dryRun: string[];
}

// ---------------------------------------------------------------------------------------------
// Child processes: promisified spawn, killed (their whole process group) on timeout or in afterAll.

interface Ran {
  command: string;
  cwd: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  ms: number;
  stdout: string;
  stderr: string;
}

const running = new Set<ChildProcess>();
/** Set by afterAll: a pipeline still going starts no further command. */
let stopping = false;

function killGroup(child: ChildProcess): void {
  try {
    if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** The environment of this process without npm's (`npm test` sets npm_config_local_prefix etc.). */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^npm_/i.test(key) && key !== 'INIT_CWD' && key !== 'NODE_PATH') env[key] = value;
  }
  return { ...env, ...extra };
}

function run(
  command: string,
  args: string[],
  options: { cwd: string; timeoutMs: number; env?: NodeJS.ProcessEnv },
): Promise<Ran> {
  const started = Date.now();
  const line = [command, ...args].join(' ');
  if (stopping) return Promise.reject(new Error(`${line}: not started, the tests are over`));
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? cleanEnv(),
      detached: true, // its own process group, so that a timeout kills npm's children too
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    running.add(child);
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child);
    }, options.timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      running.delete(child);
      reject(new Error(`${line} (in ${options.cwd}) did not start: ${err.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({
        command: line,
        cwd: options.cwd,
        code,
        signal,
        timedOut,
        ms: Date.now() - started,
        stdout,
        stderr,
      });
    });
  });
}

function tail(text: string, lines = 60): string {
  const all = text.trimEnd().split('\n');
  return (all.length > lines ? ['[...]', ...all.slice(-lines)] : all).join('\n');
}

function describeRun(r: Ran, timeoutMs?: number): string {
  const ending = r.timedOut
    ? `did not exit within ${timeoutMs ?? '?'} ms (killed)`
    : `exited with code ${r.code}${r.signal ? `, signal ${r.signal}` : ''} after ${r.ms} ms`;
  return `\`${r.command}\` in ${r.cwd} ${ending}\n--- stdout ---\n${tail(r.stdout)}\n--- stderr ---\n${tail(r.stderr)}`;
}

/** run(), failing with the command's output unless it exited with code 0 in time. */
async function runOk(
  command: string,
  args: string[],
  options: { cwd: string; timeoutMs: number; env?: NodeJS.ProcessEnv },
): Promise<Ran> {
  const r = await run(command, args, options);
  if (r.timedOut || r.code !== 0) throw new Error(describeRun(r, options.timeoutMs));
  return r;
}

// ---------------------------------------------------------------------------------------------
// Packing

function parsePackJson(r: Ran): { filename: string; files: { path: string }[] } {
  const start = r.stdout.search(/^\[/m);
  try {
    const [result] = JSON.parse(r.stdout.slice(start)) as {
      filename: string;
      files: { path: string }[];
    }[];
    return result;
  } catch (err) {
    throw new Error(`cannot parse the JSON of ${describeRun(r)}\n${String(err)}`);
  }
}

async function pack(dir: string, destination: string): Promise<Packed> {
  const cwd = join(root, dir);
  const packageJson = JSON.parse(await readFile(join(cwd, 'package.json'), 'utf8')) as PackageJson;
  // The real pack runs prepack (the build); the dry run after it lists the same dist/ unbuilt.
  const real = parsePackJson(
    await runOk('npm', ['pack', '--json', '--pack-destination', destination], {
      cwd,
      timeoutMs: 120_000,
    }),
  );
  const dryRun = parsePackJson(
    await runOk('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
      cwd,
      timeoutMs: 60_000,
    }),
  );
  return {
    packageJson,
    tarball: join(destination, real.filename),
    packed: real.files.map((f) => f.path).sort(),
    dryRun: dryRun.files.map((f) => f.path).sort(),
  };
}

/** Every file that main, types, exports and typesVersions point at, without the leading `./`. */
function entryTargets(pkg: PackageJson): string[] {
  const targets = [pkg.main, pkg.types];
  for (const value of Object.values(pkg.exports ?? {}))
    targets.push(...(typeof value === 'string' ? [value] : Object.values(value)));
  for (const map of Object.values(pkg.typesVersions ?? {}))
    for (const paths of Object.values(map)) targets.push(...paths);
  return [...new Set(targets.filter((t): t is string => !!t).map((t) => t.replace(/^\.\//, '')))];
}

// ---------------------------------------------------------------------------------------------
// The outside apps

function installedVersion(name: string): string {
  const pkg = require(join(root, 'node_modules', name, 'package.json')) as { version: string };
  return pkg.version;
}

/** NestJS 11, as the packages' peer ranges still allow (the repository itself is on 12). */
const NEST_11: Record<string, string> = {
  '@nestjs/common': '11.2.10',
  '@nestjs/core': '11.2.10',
  '@nestjs/platform-express': '11.2.10',
  '@nestjs/microservices': '11.2.6',
  '@nestjs/testing': '11.2.6',
  '@nestjs/terminus': '11.1.1',
};
/** NestJS 12: the versions the repository runs on. */
const NEST_12: Record<string, string> = Object.fromEntries(
  Object.keys(NEST_11).map((name) => [name, installedVersion(name)]),
);

/** TypeScript 6 (the repository's) and 5.9, for the apps' own tsc and ts-jest. */
const TS_6 = installedVersion('typescript');
const TS_5 = installedVersion('typescript-5.9');

/** A Node binary the apps run on. */
interface NodeBin {
  path: string;
  version: string;
}

function nodeVersion(path: string): string {
  return execFileSync(path, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
}

const major = (node: NodeBin) => Number(node.version.split('.')[0]);

/** The Node running jest: >= 24.9 (jest loads NestJS 12 through require(esm) there). */
const NODE_24: NodeBin = { path: process.execPath, version: process.versions.node };

/**
 * An older supported Node (20.19+ or 22.12+) to run the apps on too: NODE_20_BIN, else the first
 * `node` on the PATH outside node_modules (npm scripts put the Node 24 of node_modules first).
 */
function findOlderNode(): NodeBin | undefined {
  const candidates = process.env.NODE_20_BIN
    ? [process.env.NODE_20_BIN]
    : (process.env.PATH ?? '')
        .split(delimiter)
        .filter((dir) => dir && !dir.split(sep).includes('node_modules'))
        .map((dir) => join(dir, 'node'));
  for (const path of candidates) {
    if (!existsSync(path)) continue;
    const node = { path, version: nodeVersion(path) };
    if (major(node) < 24) return node;
  }
  return undefined;
}

type AppName = 'A' | 'B' | 'C' | 'D';

interface Variant {
  name: AppName;
  nest: 11 | 12;
  kind: 'esm' | 'cjs';
  dir: string;
  main: 'main-a.ts' | 'main-b.ts';
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  tsconfig: Record<string, unknown>;
  /** The app's TypeScript. */
  typescript: string;
  /** The Nodes the compiled app runs on, one run each. */
  nodes: NodeBin[];
  /** The Node the app's own jest runs the user's spec on (CommonJS apps only). */
  jest?: NodeBin;
}

interface AppResult {
  variant: string;
  ioredis: { app: string; appVersion: string; stampede: string; streamBatchAck: string };
  stampede: {
    calls: number;
    loads: number;
    loadsPerInstance: number[];
    distinctValues: string[];
    metrics: Record<string, number>[];
    extra?: unknown;
  };
  streams: {
    emitted: number;
    handled: number;
    distinctIds: number;
    distinctPayloads: number;
    redeliveries: number;
    extra?: unknown;
  };
  cacheManager?: { calls: number; loads: number; distinctValues: unknown[] };
  routes?: { requests: number; runs: number; statuses: number[]; bodies: string[] };
  installed?: Record<string, boolean>;
  telemetry?: Record<string, number>;
  health?: Record<'stampede' | 'streamBatchAck', { exports?: string[]; error?: string }>;
}

interface AppRun {
  node: NodeBin;
  keyPrefix: string;
  stream: string;
  ran: Ran;
  result: AppResult;
}

const commonCompilerOptions = {
  strict: true,
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
  declaration: true,
  removeComments: true,
  allowSyntheticDefaultImports: true,
  sourceMap: true,
  forceConsistentCasingInFileNames: true,
  outDir: './dist',
  rootDir: './src',
  types: ['node'],
};

/** tsconfig of a new project on nodenext: an ES module app or a CommonJS one by package type. */
const nodenextTsconfig = {
  compilerOptions: {
    ...commonCompilerOptions,
    module: 'nodenext',
    moduleResolution: 'nodenext',
    resolvePackageJsonExports: true,
    esModuleInterop: true,
    isolatedModules: true,
    target: 'ES2023',
    skipLibCheck: false, // the packages' .d.ts are checked too
  },
  include: ['src'],
};

/** The jest of a new CommonJS project, with ts-jest, for test/*.e2e-spec.ts. */
const jestDevDependencies = (): Record<string, string> => ({
  jest: installedVersion('jest'),
  'ts-jest': installedVersion('ts-jest'),
  '@types/jest': installedVersion('@types/jest'),
});
const jestConfig = {
  rootDir: '.',
  testRegex: '.*\\.e2e-spec\\.ts$',
  moduleFileExtensions: ['js', 'json', 'ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.spec.json' }] },
  testEnvironment: 'node',
};

async function install(v: Variant): Promise<void> {
  await mkdir(join(v.dir, 'src'), { recursive: true });
  await writeFile(
    join(v.dir, 'package.json'),
    JSON.stringify(
      {
        name: `outside-consumer-${v.name.toLowerCase()}`,
        version: '0.0.0',
        private: true,
        ...(v.kind === 'esm' ? { type: 'module' } : {}),
        dependencies: v.dependencies,
        devDependencies: {
          typescript: v.typescript,
          '@types/node': installedVersion('@types/node'),
          ...v.devDependencies,
        },
        ...(v.jest ? { jest: jestConfig } : {}),
      },
      null,
      2,
    ),
  );
  await writeFile(join(v.dir, 'tsconfig.json'), JSON.stringify(v.tsconfig, null, 2));
  await copyFile(join(fixture, 'checks.ts'), join(v.dir, 'src', 'checks.ts'));
  await copyFile(join(fixture, v.main), join(v.dir, 'src', 'main.ts'));
  if (v.jest) {
    await mkdir(join(v.dir, 'test'));
    await copyFile(join(fixture, 'app-e2e.ts'), join(v.dir, 'test', 'app.e2e-spec.ts'));
    const spec = {
      extends: './tsconfig.json',
      compilerOptions: { types: ['node', 'jest'], rootDir: '.', noEmit: true },
      include: ['src', 'test'],
    };
    await writeFile(join(v.dir, 'tsconfig.spec.json'), JSON.stringify(spec, null, 2));
  }
  await runOk('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], {
    cwd: v.dir,
    timeoutMs: 240_000,
  });
}

async function compile(v: Variant): Promise<void> {
  await runOk(
    process.execPath,
    [join('node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'],
    { cwd: v.dir, timeoutMs: 120_000 },
  );
}

const APP_TIMEOUT_MS = 90_000;

async function runApp(v: Variant, node: NodeBin): Promise<AppRun> {
  const keyPrefix = `${prefix}${v.name.toLowerCase()}${major(node)}:stampede:`;
  const stream = `${prefix}${v.name.toLowerCase()}${major(node)}:events`;
  const ran = await run(node.path, ['dist/main.js'], {
    cwd: v.dir,
    timeoutMs: APP_TIMEOUT_MS,
    env: cleanEnv({
      VARIANT: v.name,
      REDIS_URL,
      KEY_PREFIX: keyPrefix,
      STREAM: stream,
      GROUP,
      CALLS: String(CALLS),
      MESSAGES: String(MESSAGES),
    }),
  });
  if (ran.timedOut || ran.code !== 0) throw new Error(describeRun(ran, APP_TIMEOUT_MS));
  const lines = ran.stdout.split('\n').filter((l) => l.startsWith('{'));
  if (lines.length !== 1)
    throw new Error(`expected one JSON line of results from ${describeRun(ran, APP_TIMEOUT_MS)}`);
  return { node, keyPrefix, stream, ran, result: JSON.parse(lines[0]) as AppResult };
}

/** The app's own jest on the user's spec; Node 24 with VM modules for NestJS 12 (require(esm)). */
async function runJest(v: Variant, node: NodeBin): Promise<Ran> {
  const flags = v.nest === 12 ? ['--experimental-vm-modules'] : [];
  return runOk(node.path, [...flags, join('node_modules', 'jest', 'bin', 'jest.js'), '--ci'], {
    cwd: v.dir,
    timeoutMs: 150_000,
    env: cleanEnv({ REDIS_URL, KEY_PREFIX: `${prefix}${v.name.toLowerCase()}jest:` }),
  });
}

interface Pipeline {
  variant: Variant;
  installed: Promise<void>;
  compiled: Promise<void>;
  runs: Promise<AppRun[]>;
  jest: Promise<Ran | undefined>;
}

/** At most two pipeline steps at a time: the machine may have two cores. */
let slots = 2;
const waiting: (() => void)[] = [];
async function step<T>(work: () => Promise<T>): Promise<T> {
  while (slots === 0) await new Promise<void>((resolve) => waiting.push(resolve));
  slots--;
  try {
    return await work();
  } finally {
    slots++;
    waiting.shift()?.();
  }
}

/** install -> compile -> run on each Node -> the user's jest spec, started at once. */
function start(variant: Variant): Pipeline {
  const installed = step(() => install(variant));
  const compiled = installed.then(() => step(() => compile(variant)));
  const runs = compiled.then(async () => {
    const done: AppRun[] = [];
    for (const node of variant.nodes) done.push(await step(() => runApp(variant, node)));
    return done;
  });
  const jest = runs.then(() =>
    variant.jest ? step(() => runJest(variant, variant.jest!)) : undefined,
  );
  // Rejections are reported by the tests that await them, not as unhandled ones.
  for (const s of [installed, compiled, runs, jest]) s.catch(() => undefined);
  return { variant, installed, compiled, runs, jest };
}

function packageDir(v: Variant, name: string): string {
  return join(v.dir, 'node_modules', ...name.split('/'));
}

const isInside = (dir: string, file: string) => !relative(dir, file).startsWith(`..${sep}`);

/** The version of `name` installed in the app. */
function installedAt(v: Variant, name: string): string {
  return (
    JSON.parse(readFileSync(join(packageDir(v, name), 'package.json'), 'utf8')) as {
      version: string;
    }
  ).version;
}

// ---------------------------------------------------------------------------------------------

const prefix = uniquePrefix('package');
const olderNode = findOlderNode();

describe('the packed packages in NestJS 11 and 12 apps outside the repository', () => {
  jest.setTimeout(600_000);

  let redis: Redis;
  let work: string;
  const packs = {} as Record<PackageName, Packed>;
  const apps = {} as Record<AppName, Pipeline>;

  beforeAll(async () => {
    if (!olderNode || major(NODE_24) < 24)
      throw new Error(
        `the apps run on Node 20/22 and on Node 24: found ${olderNode?.version ?? 'no older Node'} ` +
          `and ${NODE_24.version}; set NODE_20_BIN to a Node 20.19+ or 22.12+`,
      );
    redis = new Redis(REDIS_URL);
    work = await mkdtemp(join(tmpdir(), 'nrr-outside-consumer-'));
    if (isInside(root, work)) throw new Error(`${work} is inside the repository: set TMPDIR`);
    const packDir = join(work, 'packs');
    await mkdir(packDir);
    // One at a time: each build writes libs/common/dist, which the next one reads.
    for (const { name, dir } of PACKAGES) packs[name] = await pack(dir, packDir);
    const tarballs = Object.fromEntries(
      PACKAGES.map(({ name }) => [name, `file:${packs[name].tarball}`]),
    );
    const base = Object.fromEntries(
      ['reflect-metadata', 'rxjs'].map((name) => [name, installedVersion(name)]),
    );
    /** Nest at `versions`; without the optional peers, no terminus and no HTTP platform. */
    const nest = (versions: Record<string, string>, withOptional: boolean) =>
      Object.fromEntries(
        Object.entries(versions).filter(
          ([name]) =>
            name !== '@nestjs/testing' &&
            (withOptional || !['@nestjs/terminus', '@nestjs/platform-express'].includes(name)),
        ),
      );
    const optionalPeers = {
      ioredis: installedVersion('ioredis'),
      'cache-manager': installedVersion('cache-manager'),
      '@opentelemetry/api': installedVersion('@opentelemetry/api'),
      '@opentelemetry/sdk-metrics': installedVersion('@opentelemetry/sdk-metrics'),
    };
    const variants: Variant[] = [
      {
        name: 'A',
        nest: 12,
        kind: 'esm',
        dir: join(work, 'app-a'),
        main: 'main-a.ts',
        dependencies: { ...tarballs, ...base, ...nest(NEST_12, true), ...optionalPeers },
        devDependencies: {},
        tsconfig: nodenextTsconfig,
        typescript: TS_6,
        nodes: [olderNode, NODE_24],
      },
      {
        name: 'B',
        nest: 11,
        kind: 'cjs',
        dir: join(work, 'app-b'),
        main: 'main-b.ts',
        dependencies: { ...tarballs, ...base, ...nest(NEST_11, false), ioredis: '^5.0.0' },
        devDependencies: {
          '@nestjs/testing': NEST_11['@nestjs/testing'],
          ...jestDevDependencies(),
        },
        tsconfig: {
          compilerOptions: {
            ...commonCompilerOptions,
            module: 'commonjs',
            moduleResolution: 'node10',
            target: 'ES2021',
            skipLibCheck: true, // as the older template; health.d.ts imports the absent terminus
          },
          include: ['src'],
        },
        typescript: TS_5,
        nodes: [olderNode],
        jest: olderNode,
      },
      {
        name: 'C',
        nest: 12,
        kind: 'cjs',
        dir: join(work, 'app-c'),
        main: 'main-a.ts',
        dependencies: { ...tarballs, ...base, ...nest(NEST_12, true), ...optionalPeers },
        devDependencies: {
          '@nestjs/testing': NEST_12['@nestjs/testing'],
          ...jestDevDependencies(),
        },
        tsconfig: nodenextTsconfig,
        typescript: TS_6,
        nodes: [olderNode, NODE_24],
        jest: NODE_24,
      },
      {
        name: 'D',
        nest: 11,
        kind: 'esm',
        dir: join(work, 'app-d'),
        main: 'main-a.ts',
        dependencies: { ...tarballs, ...base, ...nest(NEST_11, true), ...optionalPeers },
        devDependencies: {},
        tsconfig: nodenextTsconfig,
        typescript: TS_5,
        nodes: [NODE_24],
      },
    ];
    for (const variant of variants) apps[variant.name] = start(variant);
  }, 180_000);

  afterAll(async () => {
    stopping = true;
    for (const child of running) killGroup(child);
    await Promise.allSettled(Object.values(apps).flatMap((p) => [p.runs, p.jest]));
    if (work) await rm(work, { recursive: true, force: true });
    if (redis) {
      await deleteKeys(redis, prefix);
      await redis.quit();
    }
  });

  describe('npm pack', () => {
    it.each(PACKAGES.map((p) => p.name))(
      '%s: the tarball holds package.json, README.md, LICENSE, CHANGELOG.md, its docs pages and dist/ only (no sources, specs or tests)',
      (name) => {
        const { packed, dryRun, packageJson } = packs[name];
        expect(dryRun).toEqual(packed);
        const unexpected = dryRun.filter(
          (path) =>
            !TOP_LEVEL_FILES.includes(path) &&
            !DOCS_PAGES[name].includes(path) &&
            !(
              path.startsWith('dist/') &&
              (!path.endsWith('.ts') || path.endsWith('.d.ts')) &&
              !/\.(e2e-)?spec\.|(^|\/)(test|tests|__tests__)\/|\.tsbuildinfo$/.test(path)
            ),
        );
        expect(unexpected).toEqual([]);
        // Everything main, types, exports and typesVersions name is in it.
        expect(entryTargets(packageJson).filter((t) => !dryRun.includes(t))).toEqual([]);
      },
    );

    it('stampede and stream-batch-ack depend on common at its version, and it only on their ioredis peer', () => {
      const common = packs['@nest-redis-resilience/common'].packageJson;
      for (const name of [
        '@nest-redis-resilience/stampede',
        '@nest-redis-resilience/stream-batch-ack',
      ] as const) {
        expect(packs[name].packageJson.dependencies).toEqual({ [common.name]: common.version });
        expect(packs[name].packageJson.peerDependencies?.ioredis).toBe(
          common.peerDependencies?.ioredis,
        );
      }
      expect(common.dependencies).toBeUndefined();
      expect(Object.keys(common.peerDependencies ?? {})).toEqual(['ioredis']);
    });

    it.each(PACKAGES.map((p) => p.name))(
      '%s: every relative link of its README and docs pages points at a file in the tarball',
      (name) => {
        const { dir } = PACKAGES.find((p) => p.name === name)!;
        const { dryRun } = packs[name];
        for (const page of DOCS_PAGES[name]) expect(dryRun).toContain(page);
        const outside: string[] = [];
        for (const file of ['README.md', ...DOCS_PAGES[name]]) {
          const text = readFileSync(join(root, dir, file), 'utf8');
          for (const link of relativeLinks(text)) {
            const target = posix.normalize(posix.join(posix.dirname(file), link));
            if (!dryRun.includes(target)) outside.push(`${file}: ${link}`);
          }
        }
        expect(outside).toEqual([]);
      },
    );

    it.each(PACKAGES.map((p) => p.name))(
      '%s: the tarball has all of README.md, LICENSE and CHANGELOG.md',
      (name) => {
        const missing = TOP_LEVEL_FILES.filter((f) => !packs[name].dryRun.includes(f));
        expect(missing).toEqual([]);
      },
    );
  });

  /** Installed from the tarball: a real directory of the app, no link to the workspace. */
  function expectInstalledFromTarball(v: Variant, name: PackageName): void {
    const dir = packageDir(v, name);
    expect(lstatSync(dir).isSymbolicLink()).toBe(false);
    expect(isInside(v.dir, realpathSync(dir))).toBe(true);
    expect(existsSync(join(dir, 'src'))).toBe(false);
    expect(existsSync(join(dir, 'dist', 'index.js'))).toBe(true);
    const version = (require(join(dir, 'package.json')) as { version: string }).version;
    expect(version).toBe(packs[name].packageJson.version);
  }

  /** What every app must show on every Node, and what Redis holds after it exited. */
  async function expectCoreChecks(v: Variant, app: AppRun): Promise<void> {
    const { ran, result, keyPrefix, stream } = app;
    // Node 20 warns once that require(esm) is experimental; nothing else may reach stderr.
    expect(
      ran.stderr.replace(
        /^.*ExperimentalWarning: CommonJS module .*\n(.*--trace-warnings.*\n)?/gm,
        '',
      ),
    ).toBe('');
    expect(result.variant).toBe(v.name);

    // One ioredis: the app's, which both packages resolve as their peer.
    expect(isInside(v.dir, result.ioredis.app)).toBe(true);
    expect(result.ioredis.stampede).toBe(result.ioredis.app);
    expect(result.ioredis.streamBatchAck).toBe(result.ioredis.app);

    // @Cacheable + @SingleFlight() + @DistLock(): 1000 concurrent calls on each of two
    // instances, one load in all, one value.
    expect(result.stampede).toMatchObject({
      calls: 2 * CALLS,
      loads: 1,
      distinctValues: [JSON.stringify({ id: 42, name: 'product 42' })],
    });
    expect(result.stampede.metrics).toHaveLength(2);
    for (const m of result.stampede.metrics) {
      expect(m).toMatchObject({ calls: CALLS, errors: 0, storeErrors: 0, lockTimeouts: 0 });
    }
    // The value went to Redis under the key prefix, over the lock mark of the load.
    expect(JSON.parse((await redis.get(`${keyPrefix}{product:42}`))!)).toMatchObject({
      v: { id: 42, name: 'product 42' },
    });

    // ServerRedisStreams + ClientRedisStreams: 1000 emitted, each handled once, all acked.
    expect(result.streams).toMatchObject({
      emitted: MESSAGES,
      handled: MESSAGES,
      distinctIds: MESSAGES,
      distinctPayloads: MESSAGES,
      redeliveries: 0,
    });
    expect(await redis.xlen(stream)).toBe(MESSAGES);
    const pending = (await redis.call('XPENDING', stream, GROUP)) as [number, ...unknown[]];
    expect(Number(pending[0])).toBe(0);
    expect(await redis.exists(`${stream}:dlq`)).toBe(0);
  }

  /** The checks of main-a.ts: health through terminus, cache-manager, OpenTelemetry. */
  function expectOptionalPeers({ result, stream }: AppRun): void {
    expect(result.ioredis.appVersion).toBe(installedVersion('ioredis'));
    expect(result.stampede.extra).toMatchObject({
      status: 'ok',
      info: { cache: { status: 'up', store: 'redis' } },
    });
    expect(result.streams.extra).toMatchObject({
      status: 'ok',
      info: { events: { status: 'up', stream, group: GROUP, consumers: 1 } },
    });
    // @CacheRoute on an HTTP app: 51 requests, one run of the handler, one answer.
    expect(result.routes).toEqual({
      requests: 51,
      runs: 1,
      statuses: [200],
      bodies: [JSON.stringify({ symbol: 'EURUSD', price: 1.5 })],
    });
    // StampedeModule.forRoot({ cacheManager: createCache() }) from the optional peer.
    expect(result.cacheManager).toEqual({ calls: 101, loads: 1, distinctValues: [1.08] });
    // With @opentelemetry/api and an SDK installed, the same work shows in the instruments.
    expect(result.telemetry).toMatchObject({
      'stampede.calls': 2 * CALLS + 101 + 51, // the catalog, cache-manager and the route
      'stampede.loads': 3,
      'messaging.client.sent.messages': MESSAGES,
    });
    expect(result.telemetry!['messaging.client.consumed.messages']).toBeGreaterThanOrEqual(
      MESSAGES,
    );
  }

  const WITH_PEERS: [AppName, string][] = [
    ['A', 'NestJS 12, ES module app'],
    ['C', 'NestJS 12, CommonJS app'],
    ['D', 'NestJS 11, ES module app'],
  ];

  describe.each(WITH_PEERS)('%s: %s (nodenext), ioredis 6, every optional peer', (name) => {
    it('installs from the tarballs and the public registry only, without peer conflicts', async () => {
      const app = apps[name];
      await app.installed;
      for (const { name: pkg } of PACKAGES) expectInstalledFromTarball(app.variant, pkg);
      const nest = app.variant.nest === 12 ? NEST_12 : NEST_11;
      for (const dep of [
        '@nestjs/core',
        '@nestjs/microservices',
        '@nestjs/terminus',
        '@nestjs/platform-express',
      ])
        expect(installedAt(app.variant, dep)).toBe(nest[dep]);
      for (const dep of ['ioredis', 'cache-manager'])
        expect(installedAt(app.variant, dep)).toBe(installedVersion(dep));
    });

    it('compiles with its own tsc in strict mode, the packages’ .d.ts included', async () => {
      const app = apps[name];
      await app.compiled;
      expect(existsSync(join(app.variant.dir, 'dist', 'main.js'))).toBe(true);
    });

    it('runs against Redis on each Node: one load for 2 x 1000 calls, 1000 events handled once and acked, health up, telemetry, exits by itself', async () => {
      const app = apps[name];
      const runs = await app.runs;
      expect(runs.map((r) => major(r.node))).toEqual(app.variant.nodes.map(major));
      for (const run of runs) {
        await expectCoreChecks(app.variant, run);
        expectOptionalPeers(run);
      }
    });
  });

  describe('B: NestJS 11, CommonJS app (node10 resolution), ioredis 5, no optional peer', () => {
    it('installs from the tarballs without the optional peers', async () => {
      const b = apps.B;
      await b.installed;
      for (const { name } of PACKAGES) expectInstalledFromTarball(b.variant, name);
      expect(installedAt(b.variant, 'ioredis')).toMatch(/^5\./);
      expect(installedAt(b.variant, '@nestjs/core')).toBe(NEST_11['@nestjs/core']);
      expect(existsSync(packageDir(b.variant, '@nestjs/terminus'))).toBe(false);
      expect(existsSync(packageDir(b.variant, 'cache-manager'))).toBe(false);
    });

    it('compiles with its own tsc in strict mode (the /health types through typesVersions)', async () => {
      const b = apps.B;
      await b.compiled;
      expect(existsSync(join(b.variant.dir, 'dist', 'main.js'))).toBe(true);
    });

    it('runs against Redis with the main entries; the /health entries say to install @nestjs/terminus', async () => {
      const b = apps.B;
      const [app] = await b.runs;
      await expectCoreChecks(b.variant, app);
      const { result } = app;
      expect(result.ioredis.appVersion).toMatch(/^5\./);
      // The optional peers are absent, OpenTelemetry included: the runs above had no telemetry.
      expect(result.installed).toEqual({
        '@nestjs/terminus': false,
        'cache-manager': false,
        '@opentelemetry/api': false,
        '@nestjs/event-emitter': false,
      });
      for (const [key, pkg] of [
        ['stampede', '@nest-redis-resilience/stampede/health'],
        ['streamBatchAck', '@nest-redis-resilience/stream-batch-ack/health'],
      ] as const) {
        const outcome = result.health?.[key];
        expect(outcome?.exports).toBeUndefined();
        expect(outcome?.error).toContain(pkg);
        expect(outcome?.error).toContain('@nestjs/terminus');
        expect(outcome?.error).toMatch(/install/i);
        expect(outcome?.error).not.toMatch(/Cannot find module/);
      }
    });
  });

  describe.each([
    ['B', 'NestJS 11', 'its Node'],
    ['C', 'NestJS 12', 'Node 24 with VM modules'],
  ] as [AppName, string, string][])(
    "%s: a user's jest e2e spec (%s, CommonJS + ts-jest, on %s)",
    (name) => {
      it('passes against the installed tarballs, and jest exits by itself', async () => {
        const ran = await apps[name].jest;
        expect(ran?.stderr).toMatch(/Tests:\s+2 passed, 2 total/);
        expect(ran?.stderr).not.toMatch(/did not exit|open handle/i);
      });
    },
  );

  it('npm refuses ioredis 4 next to the packages: ERESOLVE naming the peer range', async () => {
    // Wait for the apps first: this install only resolves, but the machine is small.
    await Promise.allSettled(Object.values(apps).flatMap((p) => [p.runs, p.jest]));
    const dir = join(work, 'app-ioredis4');
    await mkdir(dir);
    const tarballs = Object.fromEntries(
      PACKAGES.map(({ name }) => [name, `file:${packs[name].tarball}`]),
    );
    await writeFile(
      join(dir, 'package.json'),
      JSON.stringify({
        name: 'outside-consumer-ioredis4',
        version: '0.0.0',
        private: true,
        dependencies: {
          ...tarballs,
          '@nestjs/common': installedVersion('@nestjs/common'),
          '@nestjs/core': installedVersion('@nestjs/core'),
          '@nestjs/microservices': installedVersion('@nestjs/microservices'),
          'reflect-metadata': installedVersion('reflect-metadata'),
          rxjs: installedVersion('rxjs'),
          ioredis: '^4.0.0',
        },
      }),
    );
    const ran = await run(
      'npm',
      ['install', '--dry-run', '--prefer-offline', '--no-audit', '--no-fund'],
      { cwd: dir, timeoutMs: 90_000 },
    );
    if (ran.timedOut || ran.code === 0)
      throw new Error(`expected npm to refuse: ${describeRun(ran, 90_000)}`);
    expect(ran.stderr).toContain('code ERESOLVE');
    expect(ran.stderr).toMatch(/Found: ioredis@4\.\d+\.\d+/);
    // The first package whose peer range excludes it is named, with that range.
    const named = PACKAGES.filter(({ name }) => {
      const { version, peerDependencies } = packs[name].packageJson;
      return ran.stderr.includes(
        `peer ioredis@"${peerDependencies?.ioredis}" from ${name}@${version}`,
      );
    });
    expect(named.length).toBeGreaterThan(0);
    expect(existsSync(join(dir, 'node_modules'))).toBe(false);
  });
});
