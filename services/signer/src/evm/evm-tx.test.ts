import { Transaction, Wallet, recoverAddress } from 'ethers';
import { buildEvmTransaction, signEvmTransaction } from './evm-tx.js';

const PK = Buffer.from('4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318', 'hex');
const ADDRESS = new Wallet(`0x${PK.toString('hex')}`).address;

describe('buildEvmTransaction / signEvmTransaction', () => {
  it('signs an EIP-1559 transaction that decodes back to its fields and its signer', () => {
    const tx = buildEvmTransaction({
      chainId: 31337n,
      to: '0x000000000000000000000000000000000000dEaD',
      value: 10n ** 16n,
      data: '0x',
      nonce: 7,
      gasLimit: 21000n,
      type: 2,
      maxFeePerGas: 2_000_000_000n,
      maxPriorityFeePerGas: 1_000_000_000n,
    });
    const s = signEvmTransaction(PK, tx);
    const back = Transaction.from(s.signedTx);
    expect(back.type).toBe(2);
    expect(back.chainId).toBe(31337n);
    expect(back.nonce).toBe(7);
    expect(back.value).toBe(10n ** 16n);
    expect(back.maxFeePerGas).toBe(2_000_000_000n);
    expect(back.from).toBe(ADDRESS);
    expect(s.from).toBe(ADDRESS);
    expect(s.txHash).toBe(back.hash);
    expect(recoverAddress(back.unsignedHash, back.signature!)).toBe(ADDRESS);
    expect(tx.signature).toBeNull();
  });

  it('signs a legacy transaction with EIP-155 replay protection', () => {
    const tx = buildEvmTransaction({
      chainId: 1n,
      to: null,
      value: 0n,
      data: '0x6000',
      nonce: 0,
      gasLimit: 60000n,
      type: 0,
      gasPrice: 3n,
    });
    const back = Transaction.from(signEvmTransaction(PK, tx).signedTx);
    expect(back.type).toBe(0);
    expect(back.chainId).toBe(1n);
    expect(back.to).toBeNull();
    expect(back.from).toBe(ADDRESS);
  });

  it('refuses fields missing for the type and keys of the wrong size', () => {
    const base = { chainId: 1n, to: null, value: 0n, data: '0x', nonce: 0, gasLimit: 21000n };
    expect(() => buildEvmTransaction({ ...base, type: 2, maxFeePerGas: 1n })).toThrow(/maxPriorityFeePerGas/);
    expect(() => buildEvmTransaction({ ...base, type: 0 })).toThrow(/gasPrice/);
    const tx = buildEvmTransaction({ ...base, type: 0, gasPrice: 1n });
    expect(() => signEvmTransaction(Buffer.alloc(31, 1), tx)).toThrow(/32 bytes/);
  });
});
