import { SigningKey, Transaction, computeAddress, hexlify } from 'ethers';

/** Every field of an EVM transaction signer builds (amounts in wei, as bigint). */
export interface EvmTxFields {
  chainId: bigint;
  /** EIP-55 checksummed (or lower-case) destination; null for a contract creation. */
  to: string | null;
  value: bigint;
  /** 0x-prefixed calldata (`0x` when none). */
  data: string;
  nonce: number;
  gasLimit: bigint;
  /** 2: EIP-1559 (maxFeePerGas, maxPriorityFeePerGas); 0: legacy (gasPrice, EIP-155). */
  type: 0 | 2;
  maxFeePerGas?: bigint;
  maxPriorityFeePerGas?: bigint;
  gasPrice?: bigint;
}

/** A signed transaction: the raw bytes to broadcast, its hash and the address that signed. */
export interface SignedEvmTx {
  signedTx: string;
  txHash: string;
  from: string;
}

/**
 * The unsigned ethers Transaction of `f` (pure). A type 2 transaction needs both EIP-1559 fees; a
 * type 0 one its gas price (signed with EIP-155 replay protection for `chainId`).
 */
export function buildEvmTransaction(f: EvmTxFields): Transaction {
  const tx = new Transaction();
  tx.type = f.type;
  tx.chainId = f.chainId;
  tx.to = f.to;
  tx.value = f.value;
  tx.data = f.data || '0x';
  tx.nonce = f.nonce;
  tx.gasLimit = f.gasLimit;
  if (f.type === 2) {
    if (f.maxFeePerGas === undefined || f.maxPriorityFeePerGas === undefined) {
      throw new Error('an EIP-1559 transaction needs maxFeePerGas and maxPriorityFeePerGas');
    }
    tx.maxFeePerGas = f.maxFeePerGas;
    tx.maxPriorityFeePerGas = f.maxPriorityFeePerGas;
  } else {
    if (f.gasPrice === undefined) throw new Error('a legacy transaction needs gasPrice');
    tx.gasPrice = f.gasPrice;
  }
  return tx;
}

/**
 * Signs `tx` with a 32-byte secp256k1 private key (the caller owns and zeroes the buffer); returns
 * the serialized signed transaction, its hash and the signer's address. Nothing keeps the key.
 */
export function signEvmTransaction(privateKey: Buffer | Uint8Array, tx: Transaction): SignedEvmTx {
  if (privateKey.length !== 32) throw new Error('an EVM private key is 32 bytes');
  const signed = tx.clone();
  const key = new SigningKey(hexlify(privateKey));
  signed.signature = key.sign(signed.unsignedHash);
  // The address from the public key (a fixed-base multiplication), not recovered from the
  // signature (`signed.from`, several times the cost of the signature itself).
  const from = computeAddress(key.publicKey);
  const txHash = signed.hash;
  if (!txHash) throw new Error('the signed transaction has no hash');
  return { signedTx: signed.serialized, txHash, from };
}
