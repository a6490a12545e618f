/*
 * Headless Chromium for the page tests, driven by playwright-core. The binary comes from
 * scripts/ensure-chromium.js (run by `npm test` before jest); its own browser downloads are never
 * used. The flags keep Chromium off the network: only the pages under test are loaded.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { chromium, type Browser, type BrowserContext } from 'playwright-core';

const { findChromium } = require('../../scripts/ensure-chromium.js') as {
  findChromium(): string | undefined;
};

export interface TestBrowser {
  browser: Browser;
  context: BrowserContext;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<TestBrowser> {
  const executablePath = findChromium();
  if (!executablePath) {
    throw new Error(
      'No Chromium found: run `node scripts/ensure-chromium.js` (npm test does), ' +
        'or set CHROMIUM_BIN=/path/to/chromium',
    );
  }
  const browser = await chromium.launch({
    executablePath,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-dev-shm-usage',
    ],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  return {
    browser,
    context,
    async close() {
      await context.close().catch(() => undefined);
      await browser.close().catch(() => undefined);
    },
  };
}

/**
 * Where a page screenshot goes: docs/ when UPDATE_SCREENSHOTS=1 (`npm run screenshots`), else a
 * temporary directory, so that a test run leaves the working tree as it found it.
 */
export function screenshotPath(name: string): string {
  const dir =
    process.env.UPDATE_SCREENSHOTS === '1'
      ? path.join(__dirname, '..', '..', 'docs')
      : path.join(os.tmpdir(), 'nest-redis-resilience-screenshots');
  fs.mkdirSync(dir, { recursive: true });
  return path.join(dir, name);
}
