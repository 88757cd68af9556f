module.exports = require('../../jest.preset.cjs')({ testMatch: ['<rootDir>/test/**/*.spec.ts'] });
