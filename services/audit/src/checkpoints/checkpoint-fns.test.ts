import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { checkpointSignatureValid, parseCheckpointKey, signCheckpoint } from './checkpoint-fns';

const facts = {
  orgId: '0b0c1d2e-0000-4000-8000-000000000001',
  seq: 42,
  headHash: 'a'.repeat(64),
  createdAt: new Date('2026-11-24T10:00:00.123Z'),
};

describe('checkpoint signatures', () => {
  const key = parseCheckpointKey(randomBytes(32).toString('base64'));

  it('verifies a signed checkpoint with the public key', () => {
    const c = signCheckpoint(key, facts);
    expect(c.keyId).toBe(key.keyId);
    expect(checkpointSignatureValid(key.publicKey, c)).toBe(true);
  });

  it('refuses a checkpoint whose seq, head hash, org or time was changed', () => {
    const c = signCheckpoint(key, facts);
    expect(checkpointSignatureValid(key.publicKey, { ...c, seq: 41 })).toBe(false);
    expect(checkpointSignatureValid(key.publicKey, { ...c, headHash: 'b'.repeat(64) })).toBe(false);
    expect(checkpointSignatureValid(key.publicKey, { ...c, orgId: c.orgId.replace('1', '2') })).toBe(false);
    expect(checkpointSignatureValid(key.publicKey, { ...c, createdAt: new Date() })).toBe(false);
  });

  it('refuses a checkpoint signed by another key', () => {
    const other = parseCheckpointKey(randomBytes(32).toString('base64'));
    const c = signCheckpoint(other, facts);
    expect(checkpointSignatureValid(key.publicKey, c)).toBe(false);
    expect(checkpointSignatureValid(key.publicKey, { ...c, keyId: key.keyId })).toBe(false);
  });

  it('reads a PKCS#8 PEM key and the same seed gives the same key id', () => {
    const { privateKey } = generateKeyPairSync('ed25519');
    const pem = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    const fromPem = parseCheckpointKey(pem);
    const seed = privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(16).toString('base64');
    expect(parseCheckpointKey(seed).keyId).toBe(fromPem.keyId);
  });

  it('refuses a malformed key without echoing it', () => {
    const bad = 'c2hvcnQ=';
    expect(() => parseCheckpointKey(bad)).toThrow(/AUDIT_CHECKPOINT_SIGNING_KEY/);
    try {
      parseCheckpointKey(bad);
    } catch (err) {
      expect(String(err)).not.toContain(bad);
    }
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    expect(() => parseCheckpointKey(privateKey.export({ format: 'pem', type: 'pkcs8' }).toString())).toThrow(
      /Ed25519/,
    );
  });
});
