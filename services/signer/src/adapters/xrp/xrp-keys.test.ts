import {
  ECDSA,
  Wallet,
  classicAddressToXAddress,
  deriveAddress,
  deriveKeypair,
  isValidClassicAddress,
  verifySignature,
} from 'xrpl';
import type { ChainRecord } from '../../chains/chain-types.js';
import { xrpAdapter } from './index.js';
import { xrpNetworkOf } from './xrp-keys.js';

const adapter = xrpAdapter!;

function chain(name: string, isTestnet: boolean): ChainRecord {
  return {
    id: name,
    name,
    displayName: name,
    chainId: 144n,
    family: 'xrp',
    rpcUrl: '',
    wsUrl: '',
    explorerUrl: '',
    nativeCurrency: 'XRP',
    nativeDecimals: 6,
    isTestnet,
    isEnabled: true,
    createdAt: new Date(),
    updatedAt: new Date(),
  };
}

const MAINNET = chain('xrp', false);
const TESTNET = chain('xrp-testnet', true);

describe('xrpAdapter keys', () => {
  it('is the ed25519 adapter of the xrp family', () => {
    expect(adapter.family).toBe('xrp');
    expect(adapter.curve).toBe('ed25519');
  });

  it('derives the published ripple-keypairs Ed25519 vector (seed sEdSKaCy2JT7JaM7v95H9SxkhP9wS2r)', () => {
    // ripple-keypairs' fixture: the seed's Ed25519 key pair and account.
    const pair = deriveKeypair('sEdSKaCy2JT7JaM7v95H9SxkhP9wS2r');
    expect(pair.privateKey).toBe('EDB4C4E046826BD26190D09715FC31F4E6A728204EADD112905B08B14B7F15C4F3');
    const d = adapter.derive(Buffer.from(pair.privateKey.slice(2), 'hex'));
    expect(d.publicKey).toBe('ED01FA53FA5A7E77798F882ECE20B1ABC00BB358A9E55A202D0D0676BD0CE37A63');
    expect(d.address).toBe('rLUEXYuLiQptky37CqLcm9USQpPiz5rkpD');
  });

  it('derives what xrpl derives for random Ed25519 wallets', () => {
    for (let i = 0; i < 20; i++) {
      const w = Wallet.generate(ECDSA.ed25519);
      const d = adapter.derive(Buffer.from(w.privateKey.slice(2), 'hex'));
      expect(d).toEqual({ publicKey: w.publicKey, address: w.classicAddress });
    }
  });

  it('generates keys whose public key, address and signatures xrpl accepts', () => {
    const k = adapter.generate();
    expect(k.privateKey).toHaveLength(32);
    expect(k.publicKey).toMatch(/^ED[0-9A-F]{64}$/);
    expect(isValidClassicAddress(k.address)).toBe(true);
    expect(deriveAddress(k.publicKey)).toBe(k.address);
    expect(adapter.derive(k.privateKey)).toEqual({ publicKey: k.publicKey, address: k.address });
    const w = new Wallet(k.publicKey, `ED${k.privateKey.toString('hex').toUpperCase()}`);
    const signed = w.sign({
      TransactionType: 'Payment',
      Account: k.address,
      Destination: 'rLUEXYuLiQptky37CqLcm9USQpPiz5rkpD',
      Amount: '1',
      Fee: '10',
      Sequence: 1,
    });
    expect(verifySignature(signed.tx_blob, k.publicKey)).toBe(true);
    expect(adapter.generate().address).not.toBe(k.address);
  });

  it('refuses a private key that is not 32 bytes', () => {
    expect(() => adapter.derive(Buffer.alloc(31, 1))).toThrow('32 bytes');
    expect(() => adapter.derive(Buffer.alloc(33, 1))).toThrow('32 bytes');
  });

  it('gives the same classic address on every network', () => {
    const k = adapter.generate();
    const key = { address: k.address, publicKey: k.publicKey };
    expect(adapter.addressFor!(key, MAINNET)).toBe(k.address);
    expect(adapter.addressFor!(key, TESTNET)).toBe(k.address);
    expect(xrpNetworkOf(MAINNET)).toBe('mainnet');
    expect(xrpNetworkOf(TESTNET)).toBe('testnet');
    expect(xrpNetworkOf(chain('xrp-devnet', true))).toBe('devnet');
    expect(xrpNetworkOf(chain('my-xrpl-test', true))).toBe('testnet');
  });

  it('checks addresses with their checksum, X-addresses for their network', () => {
    const a = 'rLUEXYuLiQptky37CqLcm9USQpPiz5rkpD';
    expect(adapter.isAddress!(a, MAINNET)).toBe(true);
    expect(adapter.isAddress!(a, TESTNET)).toBe(true);
    // One character changed: the checksum fails.
    expect(adapter.isAddress!('rLUEXYuLiQptky37CqLcm9USQpPiz5rkpE', MAINNET)).toBe(false);
    expect(adapter.isAddress!('0x000000000000000000000000000000000000dEaD', MAINNET)).toBe(false);
    expect(adapter.isAddress!('', MAINNET)).toBe(false);
    const x = classicAddressToXAddress(a, 7, false);
    const t = classicAddressToXAddress(a, 7, true);
    expect(adapter.isAddress!(x, MAINNET)).toBe(true);
    expect(adapter.isAddress!(x, TESTNET)).toBe(false);
    expect(adapter.isAddress!(t, TESTNET)).toBe(true);
    expect(adapter.isAddress!(t, MAINNET)).toBe(false);
  });
});
