import { Wallet, getAddress } from 'ethers';
import { evmAdapter } from './evm-adapter.js';

describe('evmAdapter', () => {
  it('derives the known address of a known private key (web3.js docs vector)', () => {
    const pk = Buffer.from('4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318', 'hex');
    const d = evmAdapter.derive(pk);
    expect(d.address).toBe('0x2c7536E3605D9C16a7a3D7b1898e529396a65c23');
    expect(d.publicKey).toMatch(/^0x04[0-9a-f]{128}$/);
  });

  it('generates keys whose address ethers derives from the private key, EIP-55 checksummed', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const k = evmAdapter.generate();
      expect(k.privateKey).toHaveLength(32);
      expect(new Wallet(`0x${k.privateKey.toString('hex')}`).address).toBe(k.address);
      expect(getAddress(k.address.toLowerCase())).toBe(k.address);
      expect(k.address).not.toBe(k.address.toLowerCase());
      seen.add(k.address);
    }
    expect(seen.size).toBe(5);
  });

  it('refuses a private key of the wrong length', () => {
    expect(() => evmAdapter.derive(Buffer.alloc(31, 1))).toThrow(/32 bytes/);
  });
});
