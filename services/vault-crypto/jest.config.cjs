module.exports = require('../../jest.preset.cjs')({
  // A private SoftHSM token folder for the PKCS#11 tests (see the file).
  globalSetup: '<rootDir>/test/kms-softhsm-setup.cjs',
});
