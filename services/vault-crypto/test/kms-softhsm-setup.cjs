// Jest global setup of vault-crypto: a private SoftHSM 2 configuration for test/kms-pkcs11.spec.ts.
// SoftHSM reads SOFTHSM2_CONF with getenv() at C_Initialize, and a test file's process.env is
// jest's copy, not the real environment; so the variable is set here, in the parent process,
// before the workers start. The token folder is removed when the run ends.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

module.exports = async function kmsSoftHsmSetup() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-softhsm-'));
  fs.mkdirSync(path.join(dir, 'tokens'));
  const conf = path.join(dir, 'softhsm2.conf');
  fs.writeFileSync(
    conf,
    `directories.tokendir = ${path.join(dir, 'tokens')}\nobjectstore.backend = file\nlog.level = ERROR\n`,
  );
  process.env.SOFTHSM2_CONF = conf;
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
};
