import { InvalidArgumentError } from '@custos/service-kit';
import { CHAIN_ADAPTERS } from '../adapters/registry.js';
import type { ChainRecord } from '../chains/chain-types.js';
import { agentIdOf, creatableCustody, keyDetails, onNetwork, sortKeys } from './key-fns.js';
import type { SigningKeyRecord } from './key-types.js';

const key = (over: Partial<SigningKeyRecord>): SigningKeyRecord => ({
  id: '11111111-1111-4111-8111-111111111111',
  orgId: '22222222-2222-4222-8222-222222222222',
  agentId: '33333333-3333-4333-8333-333333333333',
  family: 'evm',
  curve: 'secp256k1',
  publicKey: '0x04ab',
  address: '0xAbC',
  keyVersion: 1,
  custody: 'server',
  isActive: true,
  vaultSecretId: '44444444-4444-4444-8444-444444444444',
  createdBy: '55555555-5555-4555-8555-555555555555',
  createdAt: new Date(0),
  rotatedAt: null,
  ...over,
});

describe('key rules', () => {
  it('accepts server and client_tss custody, naming custody otherwise', () => {
    expect(creatableCustody('')).toBe('server');
    expect(creatableCustody('server')).toBe('server');
    expect(creatableCustody('client_tss')).toBe('client_tss');
    for (const c of ['passkey_owner', 'hsm', 'CLIENT_TSS']) {
      expect(() => creatableCustody(c)).toThrow(InvalidArgumentError);
      expect(() => creatableCustody(c)).toThrow(/custody|server/);
    }
  });

  it('takes a UUID agent id only', () => {
    expect(agentIdOf('33333333-3333-4333-8333-33333333333A')).toBe('33333333-3333-4333-8333-33333333333a');
    expect(() => agentIdOf('me')).toThrow(InvalidArgumentError);
  });

  it('describes a key for audit without its public or private key material', () => {
    const d = keyDetails(key({}));
    expect(d).toEqual({
      agent_id: '33333333-3333-4333-8333-333333333333',
      chain: 'ethereum',
      curve: 'secp256k1',
      address: '0xAbC',
      key_version: 1,
      custody: 'server',
    });
  });

  it('lists active versions first, then newest', () => {
    const sorted = sortKeys([
      key({ id: 'old', keyVersion: 1, isActive: false }),
      key({ id: 'new', keyVersion: 3, isActive: true }),
      key({ id: 'mid', keyVersion: 2, isActive: false }),
    ]);
    expect(sorted.map((k) => k.id)).toEqual(['new', 'mid', 'old']);
  });
});

describe('onNetwork', () => {
  const chainOf = (name: string, family: ChainRecord['family'], isTestnet: boolean) =>
    ({ name, family, isTestnet }) as ChainRecord;
  it("answers a key's address in the named chain's network form; keeps a key without one as it is", () => {
    const btc = CHAIN_ADAPTERS.bitcoin!;
    const g = btc.generate();
    const k = key({ family: 'bitcoin', publicKey: g.publicKey, address: g.address });
    g.privateKey.fill(0);
    expect(k.address).toMatch(/^bc1q/);
    expect(onNetwork(btc, k, chainOf('bitcoin-regtest', 'bitcoin', true)).address).toMatch(/^bcrt1q/);
    expect(onNetwork(btc, k, chainOf('bitcoin-testnet', 'bitcoin', true)).address).toMatch(/^tb1q/);
    expect(onNetwork(btc, k, chainOf('bitcoin', 'bitcoin', false))).toEqual(k);
    const ada = CHAIN_ADAPTERS.cardano!;
    const c = ada.generate();
    c.privateKey.fill(0);
    const ck = key({ family: 'cardano', publicKey: c.publicKey, address: c.address });
    expect(onNetwork(ada, ck, chainOf('cardano-preprod', 'cardano', true)).address).toMatch(/^addr_test1/);
    expect(
      onNetwork(
        btc,
        key({ family: 'bitcoin', publicKey: '', address: '' }),
        chainOf('bitcoin-regtest', 'bitcoin', true),
      ).address,
    ).toBe('');
  });
});
