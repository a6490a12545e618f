#!/usr/bin/env node
/*
 * The table of contents of a README: the `## ` sections between `<!-- toc -->` and
 * `<!-- /toc -->`, with GitHub's heading anchors. `node scripts/readme-toc.js <README>...` writes
 * them; with `--check` it only says which README is out of date (exit code 1).
 */
const { readFileSync, writeFileSync } = require('node:fs');

const START = '<!-- toc -->';
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

/** The README with its table of contents rewritten (unchanged when it has no markers). */
function withToc(markdown) {
  const start = markdown.indexOf(START);
  const end = markdown.indexOf(END);
  if (start < 0 || end < start) return markdown;
  const seen = new Map();
  const items = [];
  let fence = null;
  for (const line of markdown.split('\n')) {
    const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (marker && (fence === null || marker.startsWith(fence))) {
      fence = fence === null ? marker : null;
      continue;
    }
    if (fence !== null) continue;
    const h = /^(#{2,3}) (.+?)\s*$/.exec(line);
    if (!h) continue;
    const text = h[2];
    const anchor = anchorOf(text, seen);
    if (h[1] === '##') items.push(`- [${text.replace(/[[\]]/g, '\\$&')}](#${anchor})`);
  }
  return `${markdown.slice(0, start + START.length)}\n\n${items.join('\n')}\n\n${markdown.slice(end)}`;
}

module.exports = { withToc };

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
