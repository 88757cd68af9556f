import { SigningKey, Transaction, Wallet } from 'ethers';
import {
  BENCH_CHAIN,
  TRANSFER,
  acceptSentTransfer,
  acceptSignedIntent,
  presignPerAccount,
  rpcBody,
  signIntentBody,
  signTransfer,
  signedTxMismatches,
  transferBody,
} from './evm-fns';

const wallet = Wallet.createRandom();
const key = new SigningKey(wallet.privateKey);
const to = Wallet.createRandom().address;

describe('request bodies', () => {
  it('asks for a sign-only EIP-1559 transfer with every field given, amounts as wei strings', () => {
    expect(signIntentBody(to, 7)).toEqual({
      intent_type: 'transaction',
      chain: 'anvil',
      tx_type: 2,
      to,
      value: '1000000000000',
      nonce: 7,
      gas_limit: 21000,
      max_fee_per_gas: '2000000000',
      max_priority_fee_per_gas: '1000000000',
    });
    // A decimal integer is wei (DECISIONS.md): no fractional part that would read as ETH.
    expect(signIntentBody(to, 0)['value']).toMatch(/^[0-9]+$/);
  });

  it('leaves nonce, gas and fees of a transfer to signer', () => {
    expect(transferBody(to, 5n)).toEqual({ chain: 'anvil', to, value: '5' });
  });

  it('builds JSON-RPC 2.0 requests', () => {
    expect(JSON.parse(rpcBody('eth_chainId', [], 3))).toEqual({
      jsonrpc: '2.0',
      id: 3,
      method: 'eth_chainId',
      params: [],
    });
  });
});

describe('signTransfer and signedTxMismatches', () => {
  it('signs the transfer the sign-intent body asks for, verifiable to the key’s address', () => {
    const { signedTx, txHash } = signTransfer(key, to, 9);
    const tx = Transaction.from(signedTx);
    expect(tx.from).toBe(wallet.address);
    expect(tx.hash).toBe(txHash);
    expect(tx.chainId).toBe(BigInt(BENCH_CHAIN.chainId));
    expect(signedTxMismatches(signedTx, { from: wallet.address, to, nonce: 9, txHash })).toEqual([]);
    // The same check accepts lower-case addresses (the answer may send either form).
    expect(
      signedTxMismatches(signedTx, { from: wallet.address.toLowerCase(), to: to.toLowerCase(), nonce: 9 }),
    ).toEqual([]);
  });

  it('names every field that differs from what was asked', () => {
    const { signedTx } = signTransfer(key, to, 1);
    const other = Wallet.createRandom().address;
    const wrong = signedTxMismatches(signedTx, {
      from: other,
      to: other,
      nonce: 2,
      txHash: `0x${'00'.repeat(32)}`,
    });
    expect(wrong.map((w) => w.split(' ')[0])).toEqual(['from', 'to', 'nonce', 'hash']);
  });

  it('refuses what is not a signed transaction, and a transfer of another amount or chain', () => {
    expect(signedTxMismatches('0x1234', { from: wallet.address, to, nonce: 0 })[0]).toMatch(
      /^not a signed transaction/,
    );
    const tx = Transaction.from({
      type: 2,
      chainId: 1n,
      to,
      value: TRANSFER.valueWei + 1n,
      nonce: 0,
      gasLimit: 21000n,
      maxFeePerGas: TRANSFER.maxFeePerGas,
      maxPriorityFeePerGas: TRANSFER.maxPriorityFeePerGas,
    });
    tx.signature = key.sign(tx.unsignedHash);
    expect(
      signedTxMismatches(tx.serialized, { from: wallet.address, to, nonce: 0 }).map((w) => w.split(' ')[0]),
    ).toEqual(['chain', 'value']);
  });
});

describe('presignPerAccount', () => {
  it('spreads rate × seconds × margin over the accounts, rounding up, at least one each', () => {
    expect(presignPerAccount(2000, 5, 64, 1.3)).toBe(Math.ceil((2000 * 5 * 1.3) / 64));
    expect(presignPerAccount(0, 5, 64)).toBe(1);
    expect(presignPerAccount(10, 1, 3, 1)).toBe(4);
    expect(() => presignPerAccount(10, 1, 0)).toThrow(RangeError);
  });
});

describe('answer bodies the signing scenarios accept', () => {
  const hash = `0x${'ab'.repeat(32)}`;
  const answer = (fields: Record<string, unknown>) => Buffer.from(JSON.stringify(fields));

  it('counts a transaction answer as a sent transfer only when broadcast or confirmed, with its hash', () => {
    expect(acceptSentTransfer(answer({ status: 'broadcast', tx_hash: hash }))).toBe(true);
    expect(acceptSentTransfer(answer({ status: 'confirmed', tx_hash: hash }))).toBe(true);
    // Signer answers 201 with status failed when the broadcast failed (its nonce given back).
    expect(acceptSentTransfer(answer({ status: 'failed', tx_hash: hash, error_message: 'x' }))).toBe(
      'status failed',
    );
    for (const status of ['pending', 'signed', 'sign_only', 'simulation_failed']) {
      expect(acceptSentTransfer(answer({ status, tx_hash: hash }))).toBe(`status ${status}`);
    }
    expect(acceptSentTransfer(answer({ tx_hash: hash }))).toBe('no status');
    expect(acceptSentTransfer(answer({ status: 'broadcast' }))).toBe('no tx_hash');
    expect(acceptSentTransfer(answer({ status: 'broadcast', tx_hash: '0x12' }))).toBe('no tx_hash');
    expect(acceptSentTransfer('not json')).toBe('not a JSON object');
    expect(acceptSentTransfer('[]')).toBe('not a JSON object');
    expect(acceptSentTransfer('null')).toBe('not a JSON object');
  });

  it('counts a sign-intent answer only when it carries the signed transaction and its hash', () => {
    const { signedTx, txHash } = signTransfer(key, to, 1);
    expect(acceptSignedIntent(answer({ signed_tx: signedTx, tx_hash: txHash }))).toBe(true);
    expect(acceptSignedIntent(answer({ signed_tx: null, tx_hash: txHash }))).toBe('no signed_tx');
    expect(acceptSignedIntent(answer({ signed_tx: signedTx, tx_hash: null }))).toBe('no tx_hash');
    expect(acceptSignedIntent('{')).toBe('not a JSON object');
  });
});
