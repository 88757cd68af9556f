import * as CSL from '@emurgo/cardano-serialization-lib-nodejs';
import type { ChainRecord } from '../../chains/chain-types.js';
import { enterpriseAddress } from './cardano-keys.js';
import { cardanoAdapter } from './index.js';

const adapter = cardanoAdapter;

function chain(name: string, isTestnet: boolean): ChainRecord {
  return {
    id: name,
    name,
    displayName: name,
    chainId: 0n,
    family: 'cardano',
    rpcUrl: 'http://127.0.0.1:1/api/v0',
    wsUrl: '',
    explorerUrl: '',
    nativeCurrency: 'ADA',
    nativeDecimals: 6,
    isTestnet,
    isEnabled: true,
    createdAt: new Date(),
    updatedAt: new Date(),
  };
}

const MAINNET = chain('cardano', false);
const PREPROD = chain('cardano-preprod', true);
const PREVIEW = chain('cardano-preview', true);

// CIP-19's test vectors: the payment verification key addr_vk1w0l2sr2zgfm26ztc6nl9xy8ghsk5sh6ldwemlpmp9xylzy4dtf7st80zhd.
const CIP19_VK = '73fea80d424276ad0978d4fe5310e8bc2d485f5f6bb3bf87612989f112ad5a7d';
const CIP19_ENTERPRISE_MAIN = 'addr1vx2fxv2umyhttkxyxp8x0dlpdt3k6cwng5pxj3jhsydzers66hrl8';
const CIP19_ENTERPRISE_TEST = 'addr_test1vz2fxv2umyhttkxyxp8x0dlpdt3k6cwng5pxj3jhsydzerspjrlsz';
const CIP19_BASE_MAIN =
  'addr1qx2fxv2umyhttkxyxp8x0dlpdt3k6cwng5pxj3jhsydzer3n0d3vllmyqwsx5wktcd8cc3sq835lu7drv2xwl2wywfgse35a3x';
const CIP19_BASE_TEST =
  'addr_test1qz2fxv2umyhttkxyxp8x0dlpdt3k6cwng5pxj3jhsydzer3n0d3vllmyqwsx5wktcd8cc3sq835lu7drv2xwl2wywfgs68faae';
const CIP19_STAKE_MAIN = 'stake1uyehkck0lajq8gr28t9uxnuvgcqrc6070x3k9r8048z8y5gh6ffgw';
const BYRON = 'Ae2tdPwUPEZFRbyhz3cpfC2CumGzNkFBN2L42rcUc2yjQpEkxDbkPodpMAi';

describe('cardanoAdapter keys', () => {
  it('is the ed25519 cardano family', () => {
    expect(adapter.family).toBe('cardano');
    expect(adapter.curve).toBe('ed25519');
  });

  it("derives RFC 8032's test 1 public key and its enterprise address from the 32-byte seed", () => {
    const sk = Buffer.from('9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60', 'hex');
    const d = adapter.derive(sk);
    expect(d.publicKey).toBe('d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a');
    const a = CSL.Address.from_bech32(d.address);
    expect(a.kind()).toBe(CSL.AddressKind.Enterprise);
    expect(a.network_id()).toBe(1);
    expect(a.payment_cred()!.to_keyhash()!.to_hex()).toBe(
      CSL.PublicKey.from_hex(d.publicKey).hash().to_hex(),
    );
    expect(d.address).toMatch(/^addr1v/);
  });

  it("writes CIP-19's enterprise address vectors for mainnet and testnet", () => {
    expect(enterpriseAddress(CIP19_VK, 1)).toBe(CIP19_ENTERPRISE_MAIN);
    expect(enterpriseAddress(CIP19_VK, 0)).toBe(CIP19_ENTERPRISE_TEST);
    const key = { publicKey: CIP19_VK, address: CIP19_ENTERPRISE_MAIN };
    expect(adapter.addressFor!(key, MAINNET)).toBe(CIP19_ENTERPRISE_MAIN);
    expect(adapter.addressFor!(key, PREPROD)).toBe(CIP19_ENTERPRISE_TEST);
    expect(adapter.addressFor!(key, PREVIEW)).toBe(CIP19_ENTERPRISE_TEST);
    // A chain named otherwise: its testnet flag decides.
    expect(adapter.addressFor!(key, chain('my-ada-test', true))).toBe(CIP19_ENTERPRISE_TEST);
    expect(adapter.addressFor!(key, chain('my-ada', false))).toBe(CIP19_ENTERPRISE_MAIN);
  });

  it('generates distinct keys whose signatures verify under the derived public key', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const k = adapter.generate();
      expect(k.privateKey).toHaveLength(32);
      expect(adapter.derive(k.privateKey)).toEqual({ publicKey: k.publicKey, address: k.address });
      const sk = CSL.PrivateKey.from_normal_bytes(k.privateKey);
      const msg = Buffer.from(`message ${i}`);
      expect(CSL.PublicKey.from_hex(k.publicKey).verify(msg, sk.sign(msg))).toBe(true);
      const a = CSL.Address.from_bech32(k.address);
      expect(a.network_id()).toBe(1);
      expect(a.payment_cred()!.to_keyhash()!.to_hex()).toBe(sk.to_public().hash().to_hex());
      seen.add(k.address);
    }
    expect(seen.size).toBe(5);
  });

  it('refuses a private key that is not 32 bytes', () => {
    expect(() => adapter.derive(Buffer.alloc(31))).toThrow(/32 bytes/);
    expect(() => adapter.derive(Buffer.alloc(64))).toThrow(/32 bytes/);
  });

  it('accepts Shelley payment addresses of the chain network only (checksums checked)', () => {
    expect(adapter.isAddress!(CIP19_ENTERPRISE_MAIN, MAINNET)).toBe(true);
    expect(adapter.isAddress!(CIP19_BASE_MAIN, MAINNET)).toBe(true);
    expect(adapter.isAddress!(CIP19_BASE_TEST, PREPROD)).toBe(true);
    expect(adapter.isAddress!(CIP19_ENTERPRISE_TEST, PREVIEW)).toBe(true);
    // Wrong network.
    expect(adapter.isAddress!(CIP19_BASE_MAIN, PREPROD)).toBe(false);
    expect(adapter.isAddress!(CIP19_ENTERPRISE_TEST, MAINNET)).toBe(false);
    // A changed character breaks the bech32 checksum.
    expect(adapter.isAddress!(CIP19_ENTERPRISE_MAIN.replace(/8$/, '9'), MAINNET)).toBe(false);
    // Reward (stake) addresses cannot hold a payment; Byron and garbage are not Shelley addresses.
    expect(adapter.isAddress!(CIP19_STAKE_MAIN, MAINNET)).toBe(false);
    expect(adapter.isAddress!(BYRON, MAINNET)).toBe(false);
    expect(adapter.isAddress!('addr1', MAINNET)).toBe(false);
    expect(adapter.isAddress!('', MAINNET)).toBe(false);
    expect(adapter.isAddress!('0x2c7536E3605D9C16a7a3D7b1898e529396a65c23', MAINNET)).toBe(false);
  });
});
