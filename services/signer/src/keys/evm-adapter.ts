import { randomBytes } from 'node:crypto';
import { SigningKey, computeAddress, hexlify } from 'ethers';
import type { ChainAdapter, GeneratedKey } from './chain-adapter.js';

// secp256k1's group order: a private key is an integer in [1, n-1].
const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

/** EVM keys: secp256k1, uncompressed 0x04… public key, EIP-55 checksummed address (ethers 6). */
export const evmAdapter: ChainAdapter = {
  family: 'evm',
  curve: 'secp256k1',
  derive(privateKey: Buffer) {
    if (privateKey.length !== 32) throw new Error('an EVM private key is 32 bytes');
    const k = new SigningKey(hexlify(privateKey));
    return { publicKey: k.publicKey, address: computeAddress(k.publicKey) };
  },
  generate(): GeneratedKey {
    for (;;) {
      const privateKey = randomBytes(32);
      const n = BigInt(`0x${privateKey.toString('hex')}`);
      if (n === 0n || n >= N) {
        privateKey.fill(0);
        continue;
      }
      return { privateKey, ...evmAdapter.derive(privateKey) };
    }
  },
};
