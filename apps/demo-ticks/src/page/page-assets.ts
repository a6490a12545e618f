import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * The files of the page, read once at start: the page's own (`public/`, beside this file in the
 * sources, copied beside the compiled file by `nest build`, see nest-cli.json) and the standalone
 * build of lightweight-charts from node_modules (it defines the `LightweightCharts` global). Served
 * by the app itself: the page loads nothing from another origin, so it works offline.
 */
export const PAGE_FILES = [
  'index.html',
  'ticks-page.js',
  'ticks-page.css',
  'favicon.svg',
  'lightweight-charts.js',
] as const;

export type PageFileName = (typeof PAGE_FILES)[number];

/** The standalone (global `LightweightCharts`) production build of the installed package. */
export function lightweightChartsPath(): string {
  // The package's `exports` only expose its ES module and package.json; the file is beside them.
  const root = dirname(require.resolve('lightweight-charts/package.json'));
  return join(root, 'dist', 'lightweight-charts.standalone.production.js');
}

export class PageAssets {
  private constructor(private readonly files: Map<PageFileName, string>) {}

  /** Reads every file; throws, naming the missing one, when one is not there. */
  static load(publicDir = join(__dirname, 'public')): PageAssets {
    const files = new Map<PageFileName, string>();
    for (const name of PAGE_FILES) {
      const path =
        name === 'lightweight-charts.js' ? lightweightChartsPath() : join(publicDir, name);
      if (!existsSync(path))
        throw new Error(
          `demo-ticks: the page file ${path} is missing` +
            (name === 'lightweight-charts.js'
              ? ' (is the lightweight-charts package installed?)'
              : ' (a build must copy src/page/public: run `npm run build:apps`)'),
        );
      files.set(name, readFileSync(path, 'utf8'));
    }
    return new PageAssets(files);
  }

  get(name: PageFileName): string {
    return this.files.get(name)!;
  }
}
