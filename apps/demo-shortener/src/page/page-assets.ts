import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** One file of the page, read once at start-up. */
export interface PageAsset {
  body: Buffer;
  contentType: string;
  /** Strong ETag (SHA-256 of the body), so a reload costs a 304. */
  etag: string;
}

/**
 * The files in ./public, next to this module both in the sources and in the build (nest-cli.json
 * copies them as assets of the app), so the page needs no front-end build step.
 */
export const PAGE_FILES = {
  'index.html': 'text/html; charset=utf-8',
  'page.js': 'text/javascript; charset=utf-8',
  'page.css': 'text/css; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
} as const;

export type PageFile = keyof typeof PAGE_FILES;

export function loadPageAssets(dir = join(__dirname, 'public')): Record<PageFile, PageAsset> {
  const assets = {} as Record<PageFile, PageAsset>;
  for (const [name, contentType] of Object.entries(PAGE_FILES) as [PageFile, string][]) {
    let body: Buffer;
    try {
      body = readFileSync(join(dir, name));
    } catch (err) {
      throw new Error(
        `The page's file ${join(dir, name)} is missing (${(err as Error).message}); ` +
          'a build must copy src/page/public (nest-cli.json "assets" of demo-shortener)',
      );
    }
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
    assets[name] = { body, contentType, etag };
  }
  return assets;
}
