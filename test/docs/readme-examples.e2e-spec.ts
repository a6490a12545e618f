/**
 * The README examples compile: for each README, and each page under docs/ and
 * libs/<package>/docs/, its ```ts blocks are concatenated in the order shown (as a reader pasting
 * them one after the other into one file would) and type-checked, strict, against the packages'
 * sources. Nothing is written to disk:
 * the file lives in memory.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import * as ts from 'typescript';

const root = join(__dirname, '..', '..');

/** The Markdown files under `dir` (relative to the root), sorted. */
function markdownUnder(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true })
    .flatMap((entry) => {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) return markdownUnder(path);
      return entry.name.endsWith('.md') ? [path] : [];
    })
    .sort();
}

const PACKAGES = ['stampede', 'stream-batch-ack'];

/**
 * The files whose ```ts blocks must compile, each on its own; `required`: it must have some.
 * The pages under libs/<package>/docs/ (shipped in the package) hold the reference parts of its
 * README.
 */
const READMES = [
  { file: 'README.md', required: false },
  { file: 'libs/stampede/README.md', required: true },
  { file: 'libs/stream-batch-ack/README.md', required: true },
  ...markdownUnder('docs').map((file) => ({ file, required: false })),
  ...PACKAGES.flatMap((pkg) =>
    markdownUnder(`libs/${pkg}/docs`).map((file) => ({ file, required: false })),
  ),
];

interface Block {
  /** 1-based line of the README where the block's code starts. */
  readmeLine: number;
  code: string;
}

/** The ```ts (or ```typescript) fenced blocks of a Markdown text, in order. */
function extractTsBlocks(markdown: string): Block[] {
  const blocks: Block[] = [];
  let fence: { marker: string; ts: boolean; start: number; body: string[] } | null = null;
  markdown.split('\n').forEach((line, i) => {
    if (fence === null) {
      const open = /^ {0,3}(`{3,}|~{3,})\s*([\w-]*)/.exec(line);
      if (open) {
        const lang = open[2].toLowerCase();
        const isTs = lang === 'ts' || lang === 'typescript';
        fence = { marker: open[1], ts: isTs, start: i + 2, body: [] };
      }
    } else if (/^ {0,3}(`{3,}|~{3,})\s*$/.test(line) && line.trim().startsWith(fence.marker)) {
      if (fence.ts) blocks.push({ readmeLine: fence.start, code: fence.body.join('\n') });
      fence = null;
    } else {
      fence.body.push(line);
    }
  });
  return blocks;
}

/** One file of all blocks, and where each of its lines came from. */
function concatenate(blocks: Block[]): { text: string; readmeLineOf: (line: number) => number } {
  const parts: string[] = [];
  const origin: number[] = [];
  for (const block of blocks) {
    block.code.split('\n').forEach((line, i) => {
      parts.push(line);
      origin.push(block.readmeLine + i);
    });
    parts.push('');
    origin.push(0);
  }
  return { text: parts.join('\n'), readmeLineOf: (line) => origin[line - 1] ?? 0 };
}

// The libraries' sources import the code they share by its package name.
const paths: Record<string, string[]> = {
  '@nest-redis-resilience/common': [join(root, 'libs', 'common', 'src')],
};
for (const pkg of PACKAGES) {
  paths[`@nest-redis-resilience/${pkg}`] = [join(root, 'libs', pkg, 'src')];
  paths[`@nest-redis-resilience/${pkg}/health`] = [join(root, 'libs', pkg, 'src', 'health')];
}

const { options: compilerOptions, errors: optionErrors } = ts.convertCompilerOptionsFromJson(
  {
    strict: true,
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    module: 'commonjs',
    target: 'ES2022',
    lib: ['ES2022'],
    skipLibCheck: true,
    types: ['node'],
    noEmit: true,
    paths,
  },
  root,
);

/** Type-checks `text` as if it were the file `fileName`; returns the formatted diagnostics. */
function typeCheck(fileName: string, text: string): readonly ts.Diagnostic[] {
  const host = ts.createCompilerHost(compilerOptions, true);
  const read = host.readFile.bind(host);
  const exists = host.fileExists.bind(host);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getCurrentDirectory = () => root;
  host.readFile = (f) => (f === fileName ? text : read(f));
  host.fileExists = (f) => f === fileName || exists(f);
  host.getSourceFile = (f, language, onError, shouldCreate) =>
    f === fileName
      ? ts.createSourceFile(f, text, language, true)
      : getSourceFile(f, language, onError, shouldCreate);
  const program = ts.createProgram({ rootNames: [fileName], options: compilerOptions, host });
  return ts.getPreEmitDiagnostics(program);
}

describe('README examples compile when pasted into one file in the order shown', () => {
  jest.setTimeout(120_000);

  it('has valid compiler options', () => {
    expect(optionErrors).toEqual([]);
  });

  it('checks the docs pages of the packages', () => {
    expect(READMES.map((r) => r.file)).toEqual(
      expect.arrayContaining([
        'libs/stampede/docs/telemetry.md',
        'libs/stampede/docs/http-routes.md',
        'libs/stream-batch-ack/docs/options.md',
        'libs/stream-batch-ack/docs/telemetry.md',
      ]),
    );
  });

  it.each(READMES)('$file', ({ file, required }) => {
    const path = join(root, file);
    expect(existsSync(path) || !required).toBe(true);
    const blocks = existsSync(path) ? extractTsBlocks(readFileSync(path, 'utf8')) : [];
    if (required) expect(blocks.length).toBeGreaterThan(0);
    if (blocks.length === 0) return;

    const { text, readmeLineOf } = concatenate(blocks);
    // A virtual file under .tmp/ (never written): imports resolve from the repository's node_modules.
    const fileName = join(root, '.tmp', 'readme-examples', file.replace(/\W+/g, '-') + '.ts');
    const diagnostics = typeCheck(fileName, text);

    const report = diagnostics.map((d) => {
      const message = ts.flattenDiagnosticMessageText(d.messageText, '\n');
      if (!d.file || d.start === undefined) return `TS${d.code}: ${message}`;
      const { line } = d.file.getLineAndCharacterOfPosition(d.start);
      const where =
        d.file.fileName === fileName
          ? `${file}:${readmeLineOf(line + 1)} (concatenated line ${line + 1})`
          : `${relative(root, d.file.fileName)}:${line + 1}`;
      const source = d.file.text.split('\n')[line]?.trim() ?? '';
      return `${where} TS${d.code}: ${message}\n    ${source}`;
    });
    if (report.length > 0) {
      console.error(
        `${file}: ${report.length} type error(s) in its ts blocks:\n${report.join('\n')}`,
      );
    }
    expect(report).toEqual([]);
  });
});
