import {
  DecryptionError,
  dataKeyAad,
  newKey,
  open,
  seal,
  unwrapDataKey,
  valueAad,
  wrapDataKey,
} from './envelope-fns';

const at = { orgId: 'o1', vaultId: 'v1', path: 'db/password', version: 1 };

describe('envelope encryption', () => {
  it('round-trips a value and never holds the plaintext in the sealed parts', () => {
    const key = newKey();
    const plaintext = Buffer.from('correct horse battery staple');
    const s = seal(key, plaintext, valueAad(at));
    expect(s.iv).toHaveLength(12);
    expect(s.tag).toHaveLength(16);
    expect(s.ciphertext.includes(plaintext)).toBe(false);
    expect(open(key, s, valueAad(at))).toEqual(plaintext);
  });

  it('uses a fresh IV for every encryption', () => {
    const key = newKey();
    const a = seal(key, Buffer.from('x'), valueAad(at));
    const b = seal(key, Buffer.from('x'), valueAad(at));
    expect(a.iv.equals(b.iv)).toBe(false);
  });

  it('refuses a ciphertext moved to another vault, path or version, or tampered', () => {
    const key = newKey();
    const s = seal(key, Buffer.from('v'), valueAad(at));
    for (const moved of [
      { ...at, vaultId: 'v2' },
      { ...at, path: 'db/other' },
      { ...at, version: 2 },
    ]) {
      expect(() => open(key, s, valueAad(moved))).toThrow(DecryptionError);
    }
    const tampered = { ...s, ciphertext: Buffer.from(s.ciphertext) };
    tampered.ciphertext[0]! ^= 1;
    expect(() => open(key, tampered, valueAad(at))).toThrow(DecryptionError);
    expect(() => open(newKey(), s, valueAad(at))).toThrow(DecryptionError);
  });

  it('wraps a data key under a KEK bound to the address and KEK version', () => {
    const kek = newKey();
    const dek = newKey();
    const wrapped = wrapDataKey(kek, dek, dataKeyAad(at, 1));
    expect(wrapped).toHaveLength(60);
    expect(wrapped.includes(dek)).toBe(false);
    expect(unwrapDataKey(kek, wrapped, dataKeyAad(at, 1))).toEqual(dek);
    expect(() => unwrapDataKey(kek, wrapped, dataKeyAad(at, 2))).toThrow(DecryptionError);
    expect(() => unwrapDataKey(kek, wrapped, dataKeyAad({ ...at, path: 'x' }, 1))).toThrow(DecryptionError);
    expect(() => unwrapDataKey(newKey(), wrapped, dataKeyAad(at, 1))).toThrow(DecryptionError);
    expect(() => unwrapDataKey(kek, wrapped.subarray(1), dataKeyAad(at, 1))).toThrow(DecryptionError);
  });
});
