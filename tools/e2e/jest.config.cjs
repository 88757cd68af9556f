module.exports = require('../../jest.preset.cjs')({
  testMatch: ['<rootDir>/test/**/*.spec.ts'],
  testTimeout: 120000,
});
