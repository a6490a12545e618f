/*
 * Lets plain `node` run this repository's TypeScript (tests' worker processes, benchmarks):
 *   node -r ./scripts/register-ts.js some-file.ts
 * Transpiles each .ts file with the project's compiler options (decorator metadata included,
 * no type check: `npm run typecheck` does that) and maps the packages' names
 * (`@nest-redis-resilience/...`) to their sources, so nothing needs building first.
 */
const fs = require('node:fs');
const path = require('node:path');
const Module = require('node:module');
const ts = require('typescript');

const root = path.resolve(__dirname, '..');
const { config } = ts.readConfigFile(path.join(root, 'tsconfig.json'), ts.sys.readFile);
const { options } = ts.convertCompilerOptionsFromJson(config.compilerOptions, root);
const compilerOptions = { ...options, sourceMap: false, inlineSourceMap: true, declaration: false };

require.extensions['.ts'] = (module, filename) => {
  const source = fs.readFileSync(filename, 'utf8');
  const { outputText } = ts.transpileModule(source, { compilerOptions, fileName: filename });
  module._compile(outputText, filename);
};

const alias = /^@nest-redis-resilience\/(common|stampede|stream-batch-ack)(\/health)?$/;
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  const match = alias.exec(request);
  if (match) request = path.join(root, 'libs', match[1], 'src', match[2] ?? '');
  return resolve.call(this, request, ...rest);
};
