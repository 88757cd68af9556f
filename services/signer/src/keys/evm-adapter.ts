import { SigningKey, computeAddress, hexlify } from 'ethers';
import type { ChainAdapter, GeneratedKey } from './chain-adapter.js';
import { randomSecp256k1PrivateKey } from './secp256k1.js';

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
    const privateKey = randomSecp256k1PrivateKey();
    return { privateKey, ...evmAdapter.derive(privateKey) };
  },
};
