/**
 * The READMEs' and docs' tables of contents list every section, in order
 * (scripts/readme-toc.js), and every relative link of the Markdown files points at a file that
 * exists and, with a `#fragment`, at one of its headings.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const { withToc, headingsOf } = require('../../scripts/readme-toc.js') as {
  withToc: (markdown: string) => string;
  headingsOf: (markdown: string) => { level: number; text: string; anchor: string }[];
};

const root = join(__dirname, '..', '..');

describe.each([
  'libs/stampede/README.md',
  'libs/stream-batch-ack/README.md',
  'docs/benchmarks.md',
  'libs/stampede/docs/http-routes.md',
  'libs/stampede/docs/telemetry.md',
  'libs/stream-batch-ack/docs/dead-letters.md',
  'libs/stream-batch-ack/docs/options.md',
  'libs/stream-batch-ack/docs/telemetry.md',
])('%s', (file) => {
  it('has a table of contents that lists every section (npm run docs:toc rewrites it)', () => {
    const text = readFileSync(join(root, file), 'utf8');
    expect(text).toMatch(/<!-- toc( depth=\d)? -->/);
    expect(withToc(text)).toBe(text);
  });
});

describe('scripts/readme-toc.js', () => {
  it('nests the ### sections under their ## section with depth=3, and numbers repeated anchors', () => {
    const text = [
      '# Title',
      '<!-- toc depth=3 -->',
      '<!-- /toc -->',
      '## One: `a` (b)',
      '### Targets',
      '```',
      '## not a heading',
      '```',
      '## Two',
      '### Targets',
      '#### Deeper',
    ].join('\n');
    expect(withToc(text)).toContain(
      [
        '- [One: `a` (b)](#one-a-b)',
        '  - [Targets](#targets)',
        '- [Two](#two)',
        '  - [Targets](#targets-1)',
      ].join('\n'),
    );
    expect(withToc(text.replace(' depth=3', ''))).toContain(
      '- [One: `a` (b)](#one-a-b)\n- [Two](#two)\n',
    );
  });
});

/** The repository's Markdown files, outside node_modules, dist and hidden folders. */
function markdownFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      return /^(node_modules|dist|coverage|\..*)$/.test(entry.name) ? [] : markdownFiles(path);
    }
    return entry.name.endsWith('.md') ? [path] : [];
  });
}

describe('relative links of the Markdown files', () => {
  const files = markdownFiles(root);

  it('finds the docs', () => {
    expect(files.map((f) => relative(root, f))).toEqual(
      expect.arrayContaining(['README.md', 'docs/benchmarks.md', 'libs/stampede/README.md']),
    );
  });

  it('point at files that exist and at headings they have', () => {
    const broken: string[] = [];
    for (const file of files) {
      const text = readFileSync(file, 'utf8').replace(
        /^ {0,3}(`{3,}|~{3,})[\s\S]*?^ {0,3}\1/gm,
        '',
      );
      for (const [, link] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue;
        const [path, fragment] = link.split('#');
        const target = path ? resolve(dirname(file), decodeURI(path)) : file;
        if (!existsSync(target)) {
          broken.push(`${relative(root, file)}: ${link} (no such file)`);
        } else if (fragment !== undefined && target.endsWith('.md')) {
          const anchors = headingsOf(readFileSync(target, 'utf8')).map((h) => h.anchor);
          if (!anchors.includes(fragment))
            broken.push(`${relative(root, file)}: ${link} (no such heading)`);
        }
      }
    }
    expect(broken).toEqual([]);
  });
});
