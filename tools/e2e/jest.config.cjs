module.exports = require('../../jest.preset.cjs')({
  testMatch: ['<rootDir>/test/**/*.spec.ts'],
  testTimeout: 120000,
  // One mesh per environment profile for the whole run (src/profiles.ts), shared by the spec files.
  globalSetup: '<rootDir>/src/global-setup.ts',
  globalTeardown: '<rootDir>/src/global-teardown.ts',
  maxWorkers: 2,
});
