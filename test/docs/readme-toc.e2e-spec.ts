/** The package READMEs' tables of contents list every section, in order (scripts/readme-toc.js). */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const { withToc } = require('../../scripts/readme-toc.js') as {
  withToc: (markdown: string) => string;
};

const root = join(__dirname, '..', '..');

describe.each(['libs/stampede/README.md', 'libs/stream-batch-ack/README.md'])('%s', (file) => {
  it('has a table of contents that lists every section (node scripts/readme-toc.js rewrites it)', () => {
    const text = readFileSync(join(root, file), 'utf8');
    expect(text).toContain('<!-- toc -->');
    expect(withToc(text)).toBe(text);
  });
});
