import { SigningKey } from 'ethers';
import type { ChainRecord } from '../../chains/chain-types.js';
import { bitcoin } from './bitcoin-lib.js';
import { bitcoinAdapter } from './index.js';

const adapter = bitcoinAdapter!;

function chain(name: string, isTestnet: boolean): ChainRecord {
  return { name, family: 'bitcoin', isTestnet, nativeDecimals: 8 } as ChainRecord;
}
const MAINNET = chain('bitcoin', false);
const TESTNET = chain('bitcoin-testnet', true);
const SIGNET = chain('bitcoin-signet', true);
const REGTEST = chain('bitcoin-regtest', true);
const OTHER_TEST = chain('my-btc-test', true);

// BIP-173's P2WPKH example: the key whose public key is secp256k1's generator (private key 1).
const ONE = Buffer.alloc(32);
ONE[31] = 1;
const G = '0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798';
const BIP173_MAIN = 'bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4';
const BIP173_TEST = 'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx';

describe('bitcoinAdapter keys', () => {
  it('is the bitcoin family with secp256k1', () => {
    expect(adapter.family).toBe('bitcoin');
    expect(adapter.curve).toBe('secp256k1');
  });

  it("derives BIP-173's P2WPKH address of the generator's key, on mainnet and testnet", () => {
    const d = adapter.derive(ONE);
    expect(d).toEqual({ publicKey: G, address: BIP173_MAIN });
    expect(adapter.addressFor!(d, TESTNET)).toBe(BIP173_TEST);
    expect(adapter.addressFor!(d, SIGNET)).toBe(BIP173_TEST);
    expect(adapter.addressFor!(d, OTHER_TEST)).toBe(BIP173_TEST);
    expect(adapter.addressFor!(d, MAINNET)).toBe(BIP173_MAIN);
    const rt = adapter.addressFor!(d, REGTEST);
    expect(rt).toMatch(/^bcrt1q/);
    const dec = bitcoin.address.fromBech32(rt);
    expect(dec).toMatchObject({ prefix: 'bcrt', version: 0 });
    expect(Buffer.from(dec.data).toString('hex')).toBe('751e76e8199196d454941c45d1b3a323f1433bd6');
  });

  it('generates distinct keys whose public key and address ethers and bitcoinjs-lib derive independently', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const k = adapter.generate();
      expect(k.privateKey).toHaveLength(32);
      const pub = Buffer.from(SigningKey.computePublicKey(k.privateKey, true).slice(2), 'hex');
      const pair = { publicKey: pub };
      expect(k.publicKey).toBe(pub.toString('hex'));
      expect(k.publicKey).toMatch(/^0[23][0-9a-f]{64}$/);
      expect(k.address).toBe(bitcoin.payments.p2wpkh({ pubkey: pair.publicKey }).address);
      expect(k.address).toMatch(/^bc1q[02-9ac-hj-np-z]{38}$/);
      expect(adapter.derive(k.privateKey)).toEqual({ publicKey: k.publicKey, address: k.address });
      expect(adapter.isAddress!(k.address, MAINNET)).toBe(true);
      const onRegtest = adapter.addressFor!(k, REGTEST);
      expect(bitcoin.address.toOutputScript(onRegtest, bitcoin.networks.regtest)).toEqual(
        bitcoin.payments.p2wpkh({ pubkey: pair.publicKey }).output,
      );
      seen.add(k.address);
    }
    expect(seen.size).toBe(5);
  });

  it('refuses private keys that are not a secp256k1 scalar', () => {
    const n = Buffer.from('fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141', 'hex');
    expect(() => adapter.derive(Buffer.alloc(32))).toThrow(/32 bytes/);
    expect(() => adapter.derive(n)).toThrow(/32 bytes/);
    expect(() => adapter.derive(Buffer.alloc(31, 1))).toThrow(/32 bytes/);
    expect(() => adapter.derive(Buffer.alloc(32, 1))).not.toThrow();
  });

  it.each([
    // [address, chain, valid]
    [BIP173_MAIN, 'bitcoin', true],
    [BIP173_MAIN.toUpperCase(), 'bitcoin', true],
    [BIP173_TEST, 'bitcoin-testnet', true],
    [BIP173_TEST, 'bitcoin-signet', true],
    [BIP173_MAIN, 'bitcoin-testnet', false],
    [BIP173_TEST, 'bitcoin', false],
    [BIP173_TEST, 'bitcoin-regtest', false],
    ['bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5', 'bitcoin', false], // checksum
    ['1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2', 'bitcoin', true], // P2PKH
    ['1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN3', 'bitcoin', false], // base58check checksum
    ['3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy', 'bitcoin', true], // P2SH
    ['3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy', 'bitcoin-testnet', false],
    ['bc1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3qccfmv3', 'bitcoin', true], // P2WSH (BIP-173)
    ['bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0', 'bitcoin', true], // P2TR (BIP-350)
    ['mipcBbFg9gMiCh81Kj8tqqdgoZub1ZJRfn', 'bitcoin-testnet', true], // testnet P2PKH
    ['mipcBbFg9gMiCh81Kj8tqqdgoZub1ZJRfn', 'bitcoin-regtest', true], // regtest shares testnet's base58 versions
    ['mipcBbFg9gMiCh81Kj8tqqdgoZub1ZJRfn', 'bitcoin', false],
    ['0x2c7536E3605D9C16a7a3D7b1898e529396a65c23', 'bitcoin', false],
    ['', 'bitcoin', false],
    ['not an address', 'bitcoin-testnet', false],
  ])('isAddress(%s) on %s is %s', (address, name, valid) => {
    const c = [MAINNET, TESTNET, SIGNET, REGTEST].find((x) => x.name === name)!;
    expect(adapter.isAddress!(address, c)).toBe(valid);
  });
});
