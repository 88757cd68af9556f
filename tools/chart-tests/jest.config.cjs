module.exports = require('../../jest.preset.cjs')({ testMatch: ['<rootDir>/**/*.spec.ts'] });
