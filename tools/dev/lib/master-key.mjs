// The dev KMS master key: made once, kept in the dev data folder (mode 0600), never printed.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { DevError, say } from './util.mjs';

function isKey(text) {
  return /^[A-Za-z0-9+/]+={0,2}$/.test(text) && Buffer.from(text, 'base64').length === 32;
}

/**
 * A dev-only 32-byte key (the KMS master key, the token-signing KEK): `variable` from the
 * environment when set, else the one in `file` (generated on first
 * use). Secrets written in dev mode are readable only with the key they were written with, so the
 * file is never replaced.
 */
export function devMasterKey(file, env = process.env, variable = 'LOCAL_KMS_MASTER_KEY') {
  if (env[variable]) {
    if (!isKey(env[variable])) throw new DevError(`${variable} is set but is not base64 of 32 bytes`);
    return { key: env[variable], how: `from ${variable}` };
  }
  let how = `kept in ${file}`;
  try {
    const fd = fs.openSync(file, 'wx', 0o600);
    try {
      fs.writeSync(fd, `${randomBytes(32).toString('base64')}\n`);
    } finally {
      fs.closeSync(fd);
    }
    how = `generated, kept in ${file} (mode 0600)`;
  } catch (err) {
    if (err.code !== 'EEXIST') throw err;
  }
  const mode = fs.statSync(file).mode & 0o777;
  if (mode & 0o077) {
    fs.chmodSync(file, 0o600);
    say(`${file} was readable by others (mode ${mode.toString(8)}): now 0600`);
  }
  const key = fs.readFileSync(file, 'utf8').trim();
  if (!isKey(key)) {
    throw new DevError(
      `${file} does not hold base64 of 32 bytes. Restore it; delete it only if this dev data folder holds no secrets you need (they become unreadable).`,
    );
  }
  return { key, how };
}
