import { createHash } from 'node:crypto';
import bs58 from 'bs58';
import { SigningKey, computeAddress, hexlify } from 'ethers';
import { TronWeb } from 'tronweb';
import type { ChainRecord } from '../../chains/chain-types.js';
import { tronAdapter } from './index.js';

function chain(name: string, isTestnet: boolean): ChainRecord {
  return {
    id: name,
    name,
    displayName: name,
    chainId: 0n,
    family: 'tron',
    rpcUrl: 'http://127.0.0.1:1',
    wsUrl: '',
    explorerUrl: '',
    nativeCurrency: 'TRX',
    nativeDecimals: 6,
    isTestnet,
    isEnabled: true,
    createdAt: new Date(),
    updatedAt: new Date(),
  };
}

/** base58check(0x41 ‖ keccak256(pub)[12..]) written out with bs58 and sha256, apart from the adapter's code. */
function independentAddress(publicKey: string): string {
  const body = Buffer.from(`41${computeAddress(publicKey).slice(2)}`, 'hex');
  const sum = createHash('sha256').update(createHash('sha256').update(body).digest()).digest().subarray(0, 4);
  return bs58.encode(Buffer.concat([body, sum]));
}

describe('tron keys', () => {
  it('derives the address TRON documents for its example private key', () => {
    // TRON's developer documentation (accounts): this private key's address is TPL66VK2…
    const pk = Buffer.from('da146374a75310b9666e834ee4ad0866d6f4035967bfc76217c5a495fff9f0d0', 'hex');
    const d = tronAdapter.derive(pk);
    expect(d.address).toBe('TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY');
    expect(d.publicKey).toBe(new SigningKey(hexlify(pk)).publicKey);
    expect(d.publicKey).toMatch(/^0x04[0-9a-f]{128}$/);
  });

  it('generates keys whose address the chain library and an independent computation agree on', () => {
    for (let i = 0; i < 5; i += 1) {
      const g = tronAdapter.generate();
      expect(g.privateKey).toHaveLength(32);
      expect(g.publicKey).toMatch(/^0x04[0-9a-f]{128}$/);
      expect(g.address).toMatch(/^T/);
      expect(TronWeb.isAddress(g.address)).toBe(true);
      expect(g.address).toBe(TronWeb.address.fromPrivateKey(g.privateKey.toString('hex')));
      expect(g.address).toBe(independentAddress(g.publicKey));
      expect(tronAdapter.derive(g.privateKey)).toEqual({ publicKey: g.publicKey, address: g.address });
    }
    expect(tronAdapter.curve).toBe('secp256k1');
    expect(tronAdapter.family).toBe('tron');
  });

  it('refuses a private key that is not 32 bytes', () => {
    expect(() => tronAdapter.derive(Buffer.alloc(31, 1))).toThrow(/32 bytes/);
  });

  it('gives the same address on mainnet, Nile and Shasta', () => {
    const g = tronAdapter.generate();
    const key = { address: g.address, publicKey: g.publicKey };
    for (const c of [
      chain('tron', false),
      chain('tron-nile', true),
      chain('tron-shasta', true),
      chain('my-tron', true),
    ]) {
      expect(tronAdapter.addressFor!(key, c)).toBe(g.address);
    }
  });

  it('validates base58check addresses with their checksum and refuses other forms', () => {
    const c = chain('tron-nile', true);
    const good = 'TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY';
    expect(tronAdapter.isAddress!(good, c)).toBe(true);
    // One character changed: the checksum fails.
    expect(tronAdapter.isAddress!('TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZZ', c)).toBe(false);
    // The hex form is valid for tronweb but refused here (documented: base58 only).
    expect(TronWeb.isAddress(TronWeb.address.toHex(good))).toBe(true);
    expect(tronAdapter.isAddress!(TronWeb.address.toHex(good), c)).toBe(false);
    // An EVM address and a Bitcoin address.
    expect(tronAdapter.isAddress!('0x92f2d69f1e8f6b8d2f0c5bb1d5b0a42bd9b4c8a3', c)).toBe(false);
    expect(tronAdapter.isAddress!('1BoatSLRHtKNngkdXEeobR76b53LETtpyT', c)).toBe(false);
    expect(tronAdapter.isAddress!('', c)).toBe(false);
  });
});
