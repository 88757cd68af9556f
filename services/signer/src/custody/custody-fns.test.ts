import { CHAIN_ADAPTERS } from '../adapters/registry';
import { Wallet } from 'ethers';
import { InvalidArgumentError } from '@custos/service-kit';
import { evmAdapter } from '../keys/evm-adapter.js';
import {
  type Wrap,
  checkWrap,
  checkWraps,
  importedKeyOf,
  keyIdOf,
  wrapOfRow,
  wrapParams,
  wrapsComplete,
} from './custody-fns.js';

const passkey = (over: Partial<Wrap> = {}): Wrap => ({
  type: 'passkey_prf',
  ciphertext: Buffer.alloc(48, 7),
  algorithm: 'AES-256-GCM',
  nonce: Buffer.alloc(12, 1),
  credentialId: 'abc_DEF-123',
  salt: Buffer.alloc(32, 2),
  kdf: '',
  kdfParams: {},
  ...over,
});
const recovery = (over: Partial<Wrap> = {}): Wrap =>
  passkey({
    type: 'recovery_code',
    credentialId: '',
    kdf: 'argon2id',
    kdfParams: { m: 65536, t: 3, p: 1 },
    ...over,
  });

/** The field a refusal names. */
function fieldOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidArgumentError);
    return (err as InvalidArgumentError).field;
  }
  return undefined;
}

describe('importedKeyOf', () => {
  it('reads an EVM key as 32 bytes that derive the same address as ethers', () => {
    const w = Wallet.createRandom();
    const bytes = importedKeyOf('evm', evmAdapter, w.privateKey);
    expect(bytes).toHaveLength(32);
    expect(evmAdapter.derive(bytes).address).toBe(w.address);
    expect(
      evmAdapter.derive(importedKeyOf('evm', evmAdapter, w.privateKey.toUpperCase().replace('0X', '0x')))
        .address,
    ).toBe(w.address);
  });

  it('refuses anything else naming private_key, without repeating it', () => {
    const N = 'fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141';
    for (const bad of [
      '',
      'ab'.repeat(32),
      `0x${'ab'.repeat(31)}`,
      `0x${'ab'.repeat(33)}`,
      `0x${'0'.repeat(64)}`,
      `0x${N}`,
      `0x${'zz'.repeat(32)}`,
    ]) {
      expect(fieldOf(() => importedKeyOf('evm', evmAdapter, bad))).toBe('private_key');
      try {
        importedKeyOf('evm', evmAdapter, bad);
      } catch (err) {
        if (bad) expect((err as Error).message).not.toContain(bad);
      }
    }
  });

  it("every family's adapter takes back, as an import, the key it generated (same public key and address)", () => {
    const families = Object.values(CHAIN_ADAPTERS);
    expect(families.length).toBeGreaterThanOrEqual(1);
    for (const adapter of families) {
      const g = adapter!.generate();
      const bytes = importedKeyOf(adapter!.family, adapter!, `0x${g.privateKey.toString('hex')}`);
      expect(adapter!.derive(bytes)).toEqual({ publicKey: g.publicKey, address: g.address });
    }
  });
});

describe('wraps', () => {
  it('accepts a passkey and a recovery wrap; complete only with both', () => {
    expect(checkWraps([passkey(), recovery()])).toHaveLength(2);
    expect(wrapsComplete(['passkey_prf'])).toBe(false);
    expect(wrapsComplete(['recovery_code', 'passkey_prf'])).toBe(true);
  });

  it('names the field of every shape or size refusal', () => {
    const cases: Array<[Wrap, string]> = [
      [passkey({ type: 'sms' as Wrap['type'] }), 'w.type'],
      [passkey({ ciphertext: Buffer.alloc(15) }), 'w.ciphertext'],
      [passkey({ ciphertext: Buffer.alloc(4097) }), 'w.ciphertext'],
      [passkey({ nonce: Buffer.alloc(65) }), 'w.nonce'],
      [passkey({ salt: Buffer.alloc(129) }), 'w.salt'],
      [passkey({ algorithm: 'AES 256' }), 'w.algorithm'],
      [passkey({ credentialId: '' }), 'w.credential_id'],
      [passkey({ credentialId: 'a+b/' }), 'w.credential_id'],
      [recovery({ credentialId: 'abc' }), 'w.credential_id'],
      [recovery({ kdf: '', kdfParams: {} }), 'w.kdf'],
      [recovery({ kdf: 'Argon2' }), 'w.kdf'],
      [passkey({ kdfParams: { m: 1 } }), 'w.kdf_params'],
      [recovery({ kdfParams: { m: 1.5 } }), 'w.kdf_params'],
      [recovery({ kdfParams: { M: 1 } }), 'w.kdf_params'],
      [
        recovery({ kdfParams: Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`k${i}`, i])) }),
        'w.kdf_params',
      ],
    ];
    for (const [w, field] of cases) expect(fieldOf(() => checkWrap(w, 'w'))).toBe(field);
    expect(fieldOf(() => checkWraps([]))).toBe('wraps');
    expect(fieldOf(() => checkWraps([passkey(), passkey()]))).toBe('wraps');
    expect(fieldOf(() => checkWraps([passkey(), recovery(), passkey()]))).toBe('wraps');
    expect(fieldOf(() => checkWraps([passkey(), recovery({ ciphertext: Buffer.alloc(1) })]))).toBe(
      'wraps[1].ciphertext',
    );
    expect(fieldOf(() => keyIdOf('nope'))).toBe('key_id');
  });

  it('round-trips a wrap through its stored form byte for byte', () => {
    const w = recovery({ ciphertext: Buffer.from([0, 255, 1, 254, ...Array(20).fill(9)]) });
    const back = wrapOfRow({
      type: w.type,
      ciphertext: w.ciphertext,
      params: JSON.parse(JSON.stringify(wrapParams(w))),
      createdAt: new Date(0),
      updatedAt: new Date(0),
    });
    expect(back).toEqual({ ...w, createdAt: new Date(0), updatedAt: new Date(0) });
  });
});
