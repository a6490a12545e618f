#!/usr/bin/env node
/*
 * The table of contents of a README or doc: the `## ` sections between `<!-- toc -->` and
 * `<!-- /toc -->` (`<!-- toc depth=3 -->`: their `### ` subsections too, nested), with GitHub's
 * heading anchors. `node scripts/readme-toc.js <file>...` writes them; with `--check` it only
 * says which file is out of date (exit code 1).
 */
const { readFileSync, writeFileSync } = require('node:fs');

const START = /<!-- toc(?: depth=([23]))? -->/;
const END = '<!-- /toc -->';

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
function anchorOf(heading, seen) {
  const base = heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .trim()
    .replace(/\s/g, '-');
  const n = seen.get(base) ?? 0;
  seen.set(base, n + 1);
  return n === 0 ? base : `${base}-${n}`;
}

/** The headings outside code blocks, with their GitHub anchors, in order. */
function headingsOf(markdown) {
  const seen = new Map();
  const headings = [];
  let fence = null;
  for (const line of markdown.split('\n')) {
    const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (marker && (fence === null || marker.startsWith(fence))) {
      fence = fence === null ? marker : null;
      continue;
    }
    if (fence !== null) continue;
    const h = /^(#{1,6}) (.+?)\s*$/.exec(line);
    if (h) headings.push({ level: h[1].length, text: h[2], anchor: anchorOf(h[2], seen) });
  }
  return headings;
}

/** The README with its table of contents rewritten (unchanged when it has no markers). */
function withToc(markdown) {
  const start = START.exec(markdown);
  const end = markdown.indexOf(END);
  if (!start || end < start.index) return markdown;
  const depth = Number(start[1] ?? 2);
  const items = headingsOf(markdown)
    .filter((h) => h.level >= 2 && h.level <= depth)
    .map((h) => `${'  '.repeat(h.level - 2)}- [${h.text.replace(/[[\]]/g, '\\$&')}](#${h.anchor})`);
  const head = markdown.slice(0, start.index + start[0].length);
  return `${head}\n\n${items.join('\n')}\n\n${markdown.slice(end)}`;
}

module.exports = { withToc, headingsOf };

if (require.main === module) {
  const check = process.argv.includes('--check');
  const files = process.argv.slice(2).filter((a) => a !== '--check');
  let stale = 0;
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    const next = withToc(text);
    if (next === text) continue;
    if (check) {
      stale++;
      process.stderr.write(
        `${file}: the table of contents is out of date (node scripts/readme-toc.js ${file})\n`,
      );
    } else writeFileSync(file, next);
  }
  process.exitCode = stale > 0 ? 1 : 0;
}
