/** One jest config for the whole monorepo: unit specs (pure code) and e2e specs (real Redis). */
const moduleNameMapper = {
  // The packages' names point at their sources: no build step before the tests.
  '^@nest-redis-resilience/(stampede|stream-batch-ack)(|/health)$': '<rootDir>/libs/$1/src$2',
  '^@nest-redis-resilience/common$': '<rootDir>/libs/common/src',
};
const transform = {
  '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.json' }],
};
const common = {
  rootDir: __dirname,
  moduleFileExtensions: ['js', 'json', 'ts'],
  testEnvironment: 'node',
  // Built output (the packages' dist/, the apps' dist/) is never what a test imports.
  modulePathIgnorePatterns: ['<rootDir>/dist/', '<rootDir>/libs/[^/]+/dist/'],
  transform,
  moduleNameMapper,
};

module.exports = {
  cacheDirectory: '<rootDir>/.jest-cache',
  // Real Redis, databases and processes on a machine that may be busy: jest's 5 s default fails
  // e2e tests that are only slow. A spec that needs longer sets its own. (Jest reads testTimeout
  // from the top level only, not from a project.)
  testTimeout: 60_000,
  projects: [
    {
      ...common,
      displayName: 'unit',
      testMatch: [
        '<rootDir>/libs/**/*.spec.ts',
        '<rootDir>/apps/**/*.spec.ts',
        '<rootDir>/bench/**/*.spec.ts',
      ],
    },
    {
      ...common,
      displayName: 'e2e',
      testMatch: [
        '<rootDir>/libs/**/test/**/*.e2e-spec.ts',
        '<rootDir>/apps/**/test/**/*.e2e-spec.ts',
        '<rootDir>/bench/**/*.e2e-spec.ts',
        '<rootDir>/examples/**/*.e2e-spec.ts',
        '<rootDir>/test/**/*.e2e-spec.ts',
      ],
    },
  ],
};
