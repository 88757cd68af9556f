// Shared jest settings: TypeScript through SWC, unit tests beside the code (*.test.ts) and
// integration tests in test/ (*.spec.ts). Integration tests talk to real Postgres, NATS and Redis.
module.exports = (overrides = {}) => ({
  testEnvironment: 'node',
  transform: {
    '^.+\\.(t|j)sx?$': [
      '@swc/jest',
      { jsc: { target: 'es2022', parser: { syntax: 'typescript' } }, module: { type: 'commonjs' } },
    ],
  },
  // ESM-only dependencies are transformed to CommonJS for jest's module system.
  transformIgnorePatterns: ['/node_modules/(?!(\\.pnpm/)?(jose|@nats-io|@noble|@scure))'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  testMatch: ['<rootDir>/src/**/*.test.ts', '<rootDir>/test/**/*.spec.ts'],
  testTimeout: 60000,
  reporters: ['default', require.resolve('./tools/test/summary-reporter.cjs')],
  ...overrides,
});
