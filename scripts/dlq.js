#!/usr/bin/env node
/*
 * The dead-letter CLI of libs/stream-batch-ack, run from its sources:
 *   npm run dlq -- list orders
 *   node scripts/dlq.js replay orders --all --redis redis://127.0.0.1:6379
 * `node scripts/dlq.js --help` lists the commands.
 */
require('./register-ts.js');
const path = require('node:path');

const { main } = require(
  path.join(__dirname, '..', 'libs/stream-batch-ack/src/dead-letter/dlq-cli.ts'),
);

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    console.error(err);
    process.exitCode = 1;
  },
);
