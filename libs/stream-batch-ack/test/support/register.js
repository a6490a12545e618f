/*
 * Lets a forked worker process run TypeScript: `node --require <this file> worker.ts`.
 * Transpiles each .ts file with typescript.transpileModule (no type-check) and maps
 * `@app/stream-batch-ack` to libs/stream-batch-ack/src, like the root jest config.
 */
const fs = require('node:fs');
const path = require('node:path');
const Module = require('node:module');
const ts = require('typescript');

const SRC = path.resolve(__dirname, '../../src');
const originalResolve = Module._resolveFilename;
Module._resolveFilename = function (request, parent, ...rest) {
  if (request === '@app/stream-batch-ack' || request.startsWith('@app/stream-batch-ack/')) {
    request = path.join(SRC, request.slice('@app/stream-batch-ack'.length));
  }
  return originalResolve.call(this, request, parent, ...rest);
};

require.extensions['.ts'] = function (module, filename) {
  const source = fs.readFileSync(filename, 'utf8');
  const { outputText } = ts.transpileModule(source, {
    fileName: filename,
    compilerOptions: {
      module: ts.ModuleKind.CommonJS,
      target: ts.ScriptTarget.ES2022,
      experimentalDecorators: true,
      emitDecoratorMetadata: true,
      esModuleInterop: true,
      sourceMap: false,
    },
  });
  module._compile(outputText, filename);
};
