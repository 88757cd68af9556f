import { createPrivateKey, createPublicKey, sign as edSign, verify as edVerify } from 'node:crypto';
import { Keypair, PublicKey } from '@solana/web3.js';
import type { ChainRecord } from '../../chains/chain-types.js';
import { solanaAdapter } from './index.js';
import { keypairOf, solanaNetworkOf } from './solana-keys.js';

function chain(name: string, isTestnet = false): ChainRecord {
  return {
    id: '00000000-0000-4000-8000-000000000001',
    name,
    displayName: name,
    chainId: 0n,
    family: 'solana',
    rpcUrl: 'http://127.0.0.1:1',
    wsUrl: '',
    explorerUrl: '',
    nativeCurrency: 'SOL',
    nativeDecimals: 9,
    isTestnet,
    isEnabled: true,
    createdAt: new Date(),
    updatedAt: new Date(),
  };
}

/** The public key bytes of a base58 address, decoded by web3.js (not by the adapter's code path). */
function hexOf(address: string): string {
  return Buffer.from(new PublicKey(address).toBytes()).toString('hex');
}

// RFC 8032 §7.1 Ed25519 test vectors (secret key = the 32-byte seed, public key).
const RFC8032 = [
  [
    '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
    'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a',
  ],
  [
    '4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb',
    '3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c',
  ],
  [
    'c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7',
    'fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025',
  ],
] as const;

describe('solanaAdapter keys', () => {
  it('is the ed25519 solana family', () => {
    expect(solanaAdapter.family).toBe('solana');
    expect(solanaAdapter.curve).toBe('ed25519');
  });

  it.each(RFC8032)('derives the RFC 8032 public key of seed %s, as a base58 address', (seed, pub) => {
    const d = solanaAdapter.derive(Buffer.from(seed, 'hex'));
    expect(d.address).toBe(d.publicKey);
    expect(hexOf(d.address)).toBe(pub);
    expect(d.address).toMatch(/^[1-9A-HJ-NP-Za-km-z]{32,44}$/);
  });

  it('derives a known address: the seed of all ones', () => {
    // Keypair.fromSeed(32 × 0x01) as published in web3.js and solana-keygen examples.
    expect(solanaAdapter.derive(Buffer.alloc(32, 1)).address).toBe(
      'AKnL4NNf3DGWZJS6cPknBuEGnVsV4A4m5tgebLHaRSZ9',
    );
  });

  it('generates 32-byte seeds whose address web3.js and node crypto derive alike, and signs with them', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const k = solanaAdapter.generate();
      expect(k.privateKey).toHaveLength(32);
      expect(Keypair.fromSeed(k.privateKey).publicKey.toBase58()).toBe(k.address);
      expect(k.publicKey).toBe(k.address);
      expect(PublicKey.isOnCurve(new PublicKey(k.address).toBytes())).toBe(true);
      expect(solanaAdapter.derive(k.privateKey)).toEqual({ publicKey: k.publicKey, address: k.address });
      // node's own ed25519 from the seed: the same public key, and its signature verifies under the address.
      const priv = createPrivateKey({
        key: Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), k.privateKey]),
        format: 'der',
        type: 'pkcs8',
      });
      const spki = createPublicKey(priv).export({ format: 'der', type: 'spki' }) as Buffer;
      expect(spki.subarray(12).toString('hex')).toBe(hexOf(k.address));
      const msg = Buffer.from('custos');
      const pub = createPublicKey({
        key: {
          kty: 'OKP',
          crv: 'Ed25519',
          x: Buffer.from(new PublicKey(k.address).toBytes()).toString('base64url'),
        },
        format: 'jwk',
      });
      expect(edVerify(null, msg, pub, edSign(null, msg, priv))).toBe(true);
      seen.add(k.address);
    }
    expect(seen.size).toBe(5);
  });

  it("takes solana-keygen's 64-byte seed ‖ public key form and refuses a mismatched one or a wrong length", () => {
    const kp = Keypair.generate();
    const d = solanaAdapter.derive(Buffer.from(kp.secretKey));
    expect(d.address).toBe(kp.publicKey.toBase58());
    const bad = Buffer.from(kp.secretKey);
    bad[40] ^= 1;
    expect(() => solanaAdapter.derive(bad)).toThrow(/does not hold the public key/);
    expect(() => solanaAdapter.derive(Buffer.alloc(31, 1))).toThrow(/32-byte/);
    expect(() => keypairOf(Buffer.alloc(33, 1))).toThrow(/32-byte/);
  });

  it('gives the same address on every cluster and names the cluster from the chain name', () => {
    const k = solanaAdapter.generate();
    const key = { address: k.address, publicKey: k.publicKey };
    for (const c of [
      chain('solana'),
      chain('solana-devnet', true),
      chain('solana-testnet', true),
      chain('my-sol', true),
    ]) {
      expect(solanaAdapter.addressFor!(key, c)).toBe(k.address);
    }
    expect(solanaNetworkOf(chain('solana'))).toBe('mainnet');
    expect(solanaNetworkOf(chain('solana-devnet', true))).toBe('devnet');
    expect(solanaNetworkOf(chain('solana-testnet', true))).toBe('testnet');
    expect(solanaNetworkOf(chain('my-sol', true))).toBe('devnet');
    expect(solanaNetworkOf(chain('my-sol', false))).toBe('mainnet');
  });

  it('accepts base58 32-byte addresses (on or off the curve) and refuses everything else', () => {
    const c = chain('solana-devnet', true);
    const isA = (a: string) => solanaAdapter.isAddress!(a, c);
    const k = solanaAdapter.generate();
    expect(isA(k.address)).toBe(true);
    expect(isA('11111111111111111111111111111111')).toBe(true); // the System program
    const [pda] = PublicKey.findProgramAddressSync([Buffer.from('vault')], new PublicKey(k.address));
    expect(PublicKey.isOnCurve(pda.toBytes())).toBe(false);
    expect(isA(pda.toBase58())).toBe(true);
    expect(isA('')).toBe(false);
    // Base58 of 32, 31 and 33 bytes of 0xff (Solana addresses carry no checksum: length is the check).
    expect(isA('JEKNVnkbo3jma5nREBBJCDoXFVeKkD56V3xKrvRmWxFG')).toBe(true);
    expect(isA('4uQeVj5tqViQh7yWWGStvkEG1Zmhx6uasJtWCJziofL')).toBe(false);
    expect(isA('2K3n5t4wSaF5mj27Tw9vStXWLWyRjjiH5Cp3CFLpKVCr1c')).toBe(false);
    expect(isA('JEKNVnkbo3jma5nREBBJCDoXFVeKkD56V3xKrvRmWxFG1')).toBe(false);
    expect(isA(`1${k.address}`)).toBe(false); // a leading zero byte: 33 bytes
    expect(isA(k.address.replace(/[1-9A-HJ-NP-Za-km-z]$/, '0'))).toBe(false); // 0 is not base58
    expect(isA('0x52908400098527886E0F7030069857D2E4169EE7')).toBe(false);
    expect(isA('bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq')).toBe(false);
    expect(isA('rHb9CJAWyB4rj91VRWn96DkukG4bwdtyTh')).toBe(false);
    expect(isA(' ' + k.address)).toBe(false);
  });
});
