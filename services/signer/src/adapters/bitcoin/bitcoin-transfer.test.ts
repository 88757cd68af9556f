import { randomBytes } from 'node:crypto';
import { type BitcoinResponder, startBitcoinResponder } from '@custos/chain-responders/bitcoin';
import { CustosError } from '@custos/service-kit';
import { Signature, SigningKey } from 'ethers';
import type { ChainRecord } from '../../chains/chain-types.js';
import {
  ChainRpcError,
  type ChainEndpoint,
  type KeyView,
  type PrepareContext,
  type PreparedTransfer,
  type TransferInput,
} from '../../keys/chain-adapter.js';
import { bitcoin } from './bitcoin-lib.js';
import { type BitcoinUnsigned, estimateVsize } from './bitcoin-transfer.js';
import { bitcoinAdapter } from './index.js';

// The adapter against a local Esplora responder (tools/chain-responders/src/bitcoin.ts) over real
// HTTP: the responder decodes every broadcast transaction with bitcoinjs-lib and checks its
// inputs, amounts, dust, fee and every signature before accepting it.

const adapter = bitcoinAdapter!;
const ops = adapter.transfers!;
const REGTEST = bitcoin.networks.regtest;

let node: BitcoinResponder;
let chain: ChainRecord;
let ep: ChainEndpoint;

beforeAll(async () => {
  node = await startBitcoinResponder({ network: 'regtest' });
  chain = {
    name: 'bitcoin-regtest',
    family: 'bitcoin',
    isTestnet: true,
    nativeDecimals: 8,
    rpcUrl: node.url,
  } as ChainRecord;
  ep = { chain, url: node.url, timeoutMs: 2000 };
});
afterAll(() => node.close());

interface Agent {
  privateKey: Buffer;
  key: KeyView;
  from: string;
  inUse: Set<string>;
}

function newAgent(): Agent {
  const g = adapter.generate();
  const key = { address: g.address, publicKey: g.publicKey };
  return { privateKey: g.privateKey, key, from: adapter.addressFor!(key, chain), inUse: new Set() };
}

function ctx(a: Agent, endpoint = ep): PrepareContext {
  return { endpoint, key: a.key, from: a.from, inputsInUse: async () => a.inUse };
}

function otherAddress(): string {
  return adapter.addressFor!(adapter.derive(randomBytes(32)), chain);
}

async function prepare(
  a: Agent,
  input: Partial<TransferInput> & { to: string; value: string },
  endpoint = ep,
) {
  const parsed = ops.parse(input, chain);
  return (await ops.prepare(ctx(a, endpoint), parsed)) as PreparedTransfer<BitcoinUnsigned>;
}

function sign(a: Agent, p: PreparedTransfer<BitcoinUnsigned>) {
  return ops.sign(a.privateKey, p, { chain, key: a.key }) as { signedTx: string; txHash: string };
}

/** The error a promise or function fails with. */
async function failure(f: () => unknown): Promise<unknown> {
  try {
    await f();
  } catch (err) {
    return err;
  }
  throw new Error('expected a failure');
}

/**
 * Checks a signed transaction with bitcoinjs-lib and ethers alone: every input is a P2WPKH spend
 * of `pub`'s output whose BIP-143 sighash is signed by `pub` (low S, SIGHASH_ALL).
 */
function verifySigned(hex: string, pub: string, values: bigint[]): InstanceType<typeof bitcoin.Transaction> {
  const tx = bitcoin.Transaction.fromHex(hex);
  const pubkey = Buffer.from(pub, 'hex');
  const program = bitcoin.payments.p2wpkh({ pubkey });
  expect(tx.ins).toHaveLength(values.length);
  tx.ins.forEach((input, i) => {
    expect(input.script).toHaveLength(0);
    expect(input.witness).toHaveLength(2);
    expect(Buffer.from(input.witness[1]!).toString('hex')).toBe(pub);
    const { signature, hashType } = bitcoin.script.signature.decode(input.witness[0]!);
    expect(hashType).toBe(bitcoin.Transaction.SIGHASH_ALL);
    const scriptCode = bitcoin.payments.p2pkh({ hash: program.hash! }).output!;
    const digest = tx.hashForWitnessV0(i, scriptCode, values[i]!, hashType);
    const r = `0x${Buffer.from(signature.subarray(0, 32)).toString('hex')}`;
    const s = `0x${Buffer.from(signature.subarray(32)).toString('hex')}`;
    expect(BigInt(s) <= 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n).toBe(true);
    const recovered = ([0, 1] as const).map((yParity) =>
      SigningKey.recoverPublicKey(
        `0x${Buffer.from(digest).toString('hex')}`,
        Signature.from({ r, s, yParity }),
      ),
    );
    expect(recovered).toContain(SigningKey.computePublicKey(`0x${pub}`, false));
  });
  return tx;
}

function outputsOf(tx: InstanceType<typeof bitcoin.Transaction>) {
  return tx.outs.map((o) => ({
    address: bitcoin.address.fromOutputScript(o.script, REGTEST),
    value: o.value,
  }));
}

describe('bitcoin transfers: prepare, sign, broadcast, status', () => {
  it('spends a confirmed UTXO to the recipient with change back, at the 6-block estimate, to confirmed', async () => {
    const a = newAgent();
    const funding = node.fund(a.from, 100_000);
    const to = otherAddress();
    node.feeEstimates = { '1': 30.2, '3': 12.5, '6': 5.3, '144': 1.1 };
    const p = await prepare(a, { to, value: '25000' });
    expect(p.inputs).toEqual([`${funding.txid}:0`]);
    expect(p.value).toBe(25_000n);
    expect(p.to).toBe(to);
    // 1 P2WPKH input, 2 P2WPKH outputs: 141 vB estimated (73-byte signature) at 5.3 sat/vB:
    // ceil(747.3) = 748 sat.
    expect(p.fee).toBe(748n);
    expect(p.details).toEqual({
      fee_rate: 5.3,
      fee_rate_source: 'fee-estimates',
      vsize: 141,
      change: 100_000 - 25_000 - 748,
      inputs: 1,
    });

    const signed = sign(a, p);
    const tx = verifySigned(signed.signedTx, a.key.publicKey, [100_000n]);
    expect(signed.txHash).toBe(tx.getId());
    expect(outputsOf(tx)).toEqual([
      { address: to, value: 25_000n },
      { address: a.from, value: 100_000n - 25_000n - 748n },
    ]);
    // The real size is at most the estimate: the fee rate paid is at least the one asked.
    expect(tx.virtualSize()).toBeLessThanOrEqual(141);

    await ops.broadcast(ep, signed);
    const seen = node.accepted.find((t) => t.txid === signed.txHash);
    expect(seen).toMatchObject({ fee: 748n, hex: signed.signedTx });
    expect(seen!.outputs.map((o) => [o.address, o.value])).toEqual([
      [to, 25_000n],
      [a.from, 74_252n],
    ]);
    const st = { txHash: signed.txHash, signedTx: signed.signedTx };
    expect(await ops.status(ep, st)).toEqual({ state: 'pending' });
    const height = node.mine();
    expect(await ops.status(ep, st)).toEqual({ state: 'confirmed', block: BigInt(height) });
  });

  it('takes a decimal BTC amount and the request fee rate', async () => {
    const a = newAgent();
    node.fund(a.from, 1_000_000);
    const p = await prepare(a, { to: otherAddress(), value: '0.005', feeRateSatPerVbyte: 2 });
    expect(p.value).toBe(500_000n);
    expect(p.fee).toBe(282n);
    expect(p.details).toMatchObject({ fee_rate: 2, fee_rate_source: 'request' });
    const signed = sign(a, p);
    await ops.broadcast(ep, signed);
    expect(node.accepted.at(-1)).toMatchObject({ txid: signed.txHash, fee: 282n });
  });

  it('uses 1 sat/vB when the node gives no estimate, the nearest longer target when there is no "6"', async () => {
    const a = newAgent();
    node.fund(a.from, 50_000);
    node.feeEstimates = {};
    expect((await prepare(a, { to: otherAddress(), value: '10000' })).details['fee_rate']).toBe(1);
    node.feeEstimates = { '2': 40, '12': 3.01, '144': 1 };
    expect((await prepare(a, { to: otherAddress(), value: '10000' })).details['fee_rate']).toBe(3.01);
    node.feeEstimates = { '1': 7.5, '3': 2.2 };
    expect((await prepare(a, { to: otherAddress(), value: '10000' })).details['fee_rate']).toBe(2.2);
    node.feeEstimates = { '6': 0.5 };
    expect((await prepare(a, { to: otherAddress(), value: '10000' })).details['fee_rate']).toBe(1);
    node.feeEstimates = { '6': 2 };
  });

  it("keeps the estimate's fraction: 1.02 sat/vB is paid as ceil(vsize × 1.02), not 2 sat/vB", async () => {
    const a = newAgent();
    node.fund(a.from, 50_000);
    node.feeEstimates = { '6': 1.02 };
    try {
      const p = await prepare(a, { to: otherAddress(), value: '10000' });
      expect(p.details['fee_rate']).toBe(1.02);
      expect(p.fee).toBe(BigInt(Math.ceil(Number(p.details['vsize']) * 1.02)));
      const s = sign(a, p);
      await ops.broadcast(ep, s);
      const tx = node.accepted.at(-1)!;
      expect(tx.txid).toBe(s.txHash);
      // At least 1.02 sat/vB of the real size, well under 2.
      expect(Number(tx.fee) / tx.vsize).toBeGreaterThanOrEqual(1.02);
      expect(Number(tx.fee) / tx.vsize).toBeLessThan(1.1);
    } finally {
      node.feeEstimates = { '6': 2 };
    }
  });

  it("amounts are satoshi and BTC (8 decimals) whatever the chain's native_decimals says", async () => {
    const a = newAgent();
    node.fund(a.from, 50_000);
    const odd = { ...chain, nativeDecimals: 18 } as ChainRecord;
    const p = await ops.prepare(
      { ...ctx(a), endpoint: { ...ep, chain: odd } },
      ops.parse({ to: otherAddress(), value: '0.0001', feeRateSatPerVbyte: 1 }, odd),
    );
    expect(p.value).toBe(10_000n);
    const err = await failure(() => ops.parse({ to: otherAddress(), value: '0.000000001' }, odd));
    expect(err).toMatchObject({ field: 'value' });
    expect(
      ops.parse({ to: otherAddress(), value: '1000' }, { ...chain, nativeDecimals: 0 } as ChainRecord),
    ).toBeTruthy();
  });

  it('selects the largest confirmed UTXOs first, skips inputs in use and unconfirmed ones', async () => {
    const a = newAgent();
    const small = node.fund(a.from, 20_000);
    const big = node.fund(a.from, 60_000);
    const mid = node.fund(a.from, 40_000);
    const p1 = await prepare(a, { to: otherAddress(), value: '70000', feeRateSatPerVbyte: 1 });
    expect(p1.inputs).toEqual([`${big.txid}:0`, `${mid.txid}:0`]);
    verifySigned(sign(a, p1).signedTx, a.key.publicKey, [60_000n, 40_000n]);

    a.inUse.add(`${big.txid}:0`);
    const p2 = await prepare(a, { to: otherAddress(), value: '50000', feeRateSatPerVbyte: 1 });
    expect(p2.inputs).toEqual([`${mid.txid}:0`, `${small.txid}:0`]);
    a.inUse.clear();

    // Spend the big one (unmined): its change is unconfirmed and not spent by the next transfer.
    const p3 = await prepare(a, { to: otherAddress(), value: '50000', feeRateSatPerVbyte: 1 });
    expect(p3.inputs).toEqual([`${big.txid}:0`]);
    const s3 = sign(a, p3);
    await ops.broadcast(ep, s3);
    const p4 = await prepare(a, { to: otherAddress(), value: '30000', feeRateSatPerVbyte: 1 });
    expect(p4.inputs).toEqual([`${mid.txid}:0`]);
    const err = await failure(() =>
      prepare(a, { to: otherAddress(), value: '65000', feeRateSatPerVbyte: 1 }),
    );
    expect(err).toBeInstanceOf(CustosError);
    expect(err as CustosError).toMatchObject({ field: 'value', type: 'insufficient_funds' });
    expect((err as CustosError)['detail']).toMatch(/60000 sat in 2 confirmed UTXO\(s\).*sat unconfirmed/);
    node.mine();
    // Mined: the change is confirmed and spendable.
    const p5 = await prepare(a, { to: otherAddress(), value: '65000', feeRateSatPerVbyte: 1 });
    expect(p5.inputs).toContain(`${s3.txHash}:1`);
  });

  it('leaves change below the dust limit to the fee (no change output)', async () => {
    const a = newAgent();
    // 1 input, 1 output: 110 vB; with change 141 vB. 10000 + 110 + 200 leaves 200 - 31 = 169 < 294.
    node.fund(a.from, 10_000 + 110 + 200);
    const p = await prepare(a, { to: otherAddress(), value: '10000', feeRateSatPerVbyte: 1 });
    expect(p.fee).toBe(310n);
    expect(p.details).toMatchObject({ change: 0, vsize: 110 });
    const signed = sign(a, p);
    const tx = verifySigned(signed.signedTx, a.key.publicKey, [10_310n]);
    expect(tx.outs).toHaveLength(1);
    await ops.broadcast(ep, signed);
    expect(node.accepted.at(-1)).toMatchObject({ txid: signed.txHash, fee: 310n });
  });

  it('signs offline (sign-only): a transaction whose signatures verify, nothing sent', async () => {
    const a = newAgent();
    node.fund(a.from, 30_000);
    const before = node.requests.length;
    const p = await prepare(a, { to: otherAddress(), value: '12345', feeRateSatPerVbyte: 3 });
    const afterPrepare = node.requests.length;
    const signed = sign(a, p);
    expect(node.requests.length).toBe(afterPrepare);
    expect(afterPrepare).toBeGreaterThan(before);
    const tx = verifySigned(signed.signedTx, a.key.publicKey, [30_000n]);
    expect(tx.outs[0]!.value).toBe(12_345n);
    expect(node.accepted.some((t) => t.txid === signed.txHash)).toBe(false);
    // A signature over the wrong amount would not verify: the check above can fail.
    const forged = bitcoin.Transaction.fromHex(signed.signedTx);
    expect(() => verifySigned(forged.toHex(), a.key.publicKey, [30_001n])).toThrow();
  });

  it('refuses to sign with another private key or a tampered prepared transfer', async () => {
    const a = newAgent();
    node.fund(a.from, 30_000);
    const p = await prepare(a, { to: otherAddress(), value: '10000', feeRateSatPerVbyte: 1 });
    const other = newAgent();
    expect(() => ops.sign(other.privateKey, p, { chain, key: a.key })).toThrow(/does not match/);
    expect(() => sign(a, { ...p, value: 9_000n })).toThrow(/recipient and amount/);
    expect(() => sign(a, { ...p, fee: 1n })).toThrow(/fee/);
  });
});

describe('bitcoin transfers: refusals', () => {
  const a0 = () => {
    const a = newAgent();
    node.fund(a.from, 40_000);
    return a;
  };

  async function refusal(a: Agent, input: Partial<TransferInput> & { to: string; value: string }) {
    const err = await failure(() => prepare(a, input));
    expect(err).toBeInstanceOf(CustosError);
    return err as CustosError;
  }

  it('insufficient funds: 400 value, type insufficient_funds', async () => {
    const a = a0();
    const d = await refusal(a, { to: otherAddress(), value: '40000', feeRateSatPerVbyte: 1 });
    expect(d).toMatchObject({ field: 'value', type: 'insufficient_funds' });
    expect(d.detail).toMatch(/40000 sat in 1 confirmed UTXO.*needs 40000 sat plus a fee of at least 110 sat/);
    const empty = newAgent();
    expect(await refusal(empty, { to: otherAddress(), value: '1000' })).toMatchObject({
      field: 'value',
      type: 'insufficient_funds',
    });
  });

  it('malformed and wrong-network recipients: 400 to', async () => {
    const a = a0();
    const good = otherAddress();
    const badChecksum = good.slice(0, -1) + (good.endsWith('q') ? 'p' : 'q');
    expect(await refusal(a, { to: badChecksum, value: '1000' })).toMatchObject({ field: 'to' });
    expect(
      await refusal(a, { to: '0x2c7536E3605D9C16a7a3D7b1898e529396a65c23', value: '1000' }),
    ).toMatchObject({
      field: 'to',
    });
    const mainnet = adapter.derive(randomBytes(32)).address;
    const d = await refusal(a, { to: mainnet, value: '1000' });
    expect(d).toMatchObject({ field: 'to' });
    expect(d.detail).toMatch(/mainnet address; chain bitcoin-regtest is on regtest/);
  });

  it('amounts below the dust limit of the recipient output: 400 value', async () => {
    const a = a0();
    expect(await refusal(a, { to: otherAddress(), value: '293' })).toMatchObject({ field: 'value' });
    const p2pkh = bitcoin.payments.p2pkh({
      pubkey: Buffer.from(a.key.publicKey, 'hex'),
      network: REGTEST,
    }).address!;
    const d = await refusal(a, { to: p2pkh, value: '545' });
    expect(d).toMatchObject({ field: 'value' });
    expect(d.detail).toMatch(/546 sat/);
    // At the limit both are accepted, and the node takes them.
    const p = await prepare(a, { to: otherAddress(), value: '294', feeRateSatPerVbyte: 1 });
    expect(p.value).toBe(294n);
    expect(p.fee * 2n > p.value).toBe(false);
  });

  it('fees above half the amount: 400 naming the fee rate when the request gave it, else value', async () => {
    const a = a0();
    const d = await refusal(a, { to: otherAddress(), value: '1000', feeRateSatPerVbyte: 10 });
    expect(d).toMatchObject({ field: 'fee_rate_sat_per_vbyte' });
    expect(d.detail).toMatch(/more than half the amount of 1000 sat/);
    node.feeEstimates = { '6': 10 };
    expect(await refusal(a, { to: otherAddress(), value: '1000' })).toMatchObject({ field: 'value' });
    node.feeEstimates = { '6': 2 };
  });

  it('fees above 0.01 BTC: 400 naming the fee rate, whatever the amount', async () => {
    const a = newAgent();
    node.fund(a.from, 50_000_000);
    const d = await refusal(a, { to: otherAddress(), value: '0.2', feeRateSatPerVbyte: 10_000 });
    expect(d).toMatchObject({ field: 'fee_rate_sat_per_vbyte' });
    expect(d.detail).toMatch(/the fee would be 1410000 sat .*more than the 1000000 sat/);
    const ok = await prepare(a, { to: otherAddress(), value: '0.2', feeRateSatPerVbyte: 7_000 });
    expect(ok.fee).toBe(987_000n);
  });

  it.each([
    [{ memo: 'hi' }, 'memo'],
    [{ destinationTag: 1 }, 'destination_tag'],
    [{ feeLimitSun: 1 }, 'fee_limit_sun'],
    [{ tokenMint: 'x' }, 'token_mint'],
    [{ ttl: 10 }, 'ttl'],
    [{ data: '0xdeadbeef' }, 'data'],
    [{ feeRateSatPerVbyte: 0 }, 'fee_rate_sat_per_vbyte'],
    [{ feeRateSatPerVbyte: 10_001 }, 'fee_rate_sat_per_vbyte'],
    [{ feeRateSatPerVbyte: Number.NaN }, 'fee_rate_sat_per_vbyte'],
    [{ value: '0' }, 'value'],
    [{ value: '-5' }, 'value'],
    [{ value: '0.000000001' }, 'value'],
  ] as [Partial<TransferInput>, string][])('parse refuses %j naming %s', (extra, field) => {
    const input = { to: otherAddress(), value: '10000', ...extra };
    let err: unknown;
    try {
      ops.parse(input, chain);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CustosError);
    expect(err as CustosError).toMatchObject({ field });
  });

  it('parse normalises an upper-case bech32 address and accepts an empty data', () => {
    const to = otherAddress();
    expect(ops.parse({ to: to.toUpperCase(), value: '1000', data: '' }, chain).to).toBe(to);
    expect(ops.parse({ to, value: '1000', memo: '', tokenMint: '' }, chain).to).toBe(to);
  });
});

describe('bitcoin transfers: size estimate', () => {
  it('is never below the signed size, and at most 1 vB per input above it', async () => {
    for (const n of [1, 2, 3, 5, 8]) {
      const a = newAgent();
      for (let i = 0; i < n; i++) node.fund(a.from, 10_000);
      const value = String(n * 10_000 - 5_000);
      const p = await prepare(a, { to: otherAddress(), value, feeRateSatPerVbyte: 1 });
      expect(p.inputs).toHaveLength(n);
      const tx = bitcoin.Transaction.fromHex(sign(a, p).signedTx);
      const estimate = Number(p.details['vsize']);
      expect(estimate).toBe(
        estimateVsize(
          n,
          tx.outs.map((o) => o.script),
        ),
      );
      expect(tx.virtualSize()).toBeLessThanOrEqual(estimate);
      expect(estimate - tx.virtualSize()).toBeLessThanOrEqual(n);
    }
  });
});

describe("bitcoin transfers: the node's answers", () => {
  async function signedFor(a: Agent, value = '10000') {
    return sign(a, await prepare(a, { to: otherAddress(), value, feeRateSatPerVbyte: 1 }));
  }

  it('a transaction the node has: sent again in the mempool is fine, once mined it is alreadyKnown', async () => {
    const a = newAgent();
    node.fund(a.from, 30_000);
    const s = await signedFor(a);
    await ops.broadcast(ep, s);
    await ops.broadcast(ep, s); // bitcoind relays a mempool transaction again without error
    node.mine();
    const err = await failure(() => ops.broadcast(ep, s));
    expect(err).toBeInstanceOf(ChainRpcError);
    expect(err).toMatchObject({ rejected: true, alreadyKnown: true });
  });

  it('a double spend is rejected (not alreadyKnown), and the loser ends expired', async () => {
    const a = newAgent();
    node.fund(a.from, 30_000);
    const p = await prepare(a, { to: otherAddress(), value: '10000', feeRateSatPerVbyte: 1 });
    const first = sign(a, p);
    const rival = sign(a, await prepare(a, { to: otherAddress(), value: '11000', feeRateSatPerVbyte: 1 }));
    expect(rival.txHash).not.toBe(first.txHash);
    await ops.broadcast(ep, rival);
    const err = (await failure(() => ops.broadcast(ep, first))) as ChainRpcError;
    expect(err).toBeInstanceOf(ChainRpcError);
    expect(err).toMatchObject({ rejected: true, alreadyKnown: false });
    expect(err.message).toMatch(/txn-mempool-conflict \(-26\)/);
    // The rival is only in the mempool (it may still be evicted or replaced): not final yet.
    expect(await ops.status(ep, { txHash: first.txHash, signedTx: first.signedTx })).toEqual({
      state: 'unknown',
    });
    node.mine();
    const st = await ops.status(ep, { txHash: first.txHash, signedTx: first.signedTx });
    expect(st).toEqual({ state: 'expired', reason: expect.stringContaining(rival.txHash) });
    const err2 = (await failure(() => ops.broadcast(ep, first))) as ChainRpcError;
    expect(err2.message).toMatch(/bad-txns-inputs-missingorspent \(-25\)/);
    expect(err2).toMatchObject({ rejected: true, alreadyKnown: false });
  });

  it('a mined transaction whose outputs are all spent: -25 from the node, status still confirmed', async () => {
    const a = newAgent();
    node.fund(a.from, 30_000);
    const p = await prepare(a, { to: a.from, value: '20000', feeRateSatPerVbyte: 1 });
    const s = sign(a, p);
    await ops.broadcast(ep, s);
    node.mine();
    // Spend both its outputs (to the key itself, with change back), then send it again.
    a.inUse = new Set();
    const next = sign(
      a,
      await prepare(a, {
        to: otherAddress(),
        value: String(20_000 + Number(p.details['change']) - 500),
        feeRateSatPerVbyte: 1,
      }),
    );
    await ops.broadcast(ep, next);
    node.mine();
    const err = (await failure(() => ops.broadcast(ep, s))) as ChainRpcError;
    expect(err).toMatchObject({ rejected: true, alreadyKnown: false });
    expect(err.message).toMatch(/bad-txns-inputs-missingorspent \(-25\)/);
    expect(await ops.status(ep, { txHash: s.txHash, signedTx: s.signedTx })).toMatchObject({
      state: 'confirmed',
    });
  });

  it('a key with more UTXOs than electrs lists: a node failure (not a refusal) saying so', async () => {
    const a = newAgent();
    for (let i = 0; i < 501; i++) node.fund(a.from, 1000);
    const err = (await failure(() => prepare(a, { to: otherAddress(), value: '10000' }))) as ChainRpcError;
    expect(err).toBeInstanceOf(ChainRpcError);
    expect(err).toMatchObject({ rejected: false, alreadyKnown: false });
    expect(err.message).toMatch(
      /more than the node's limit \(Too many unspent transaction outputs \(>500\).*not supported/,
    );
  });

  it('more than 500 small UTXOs: 400 value saying so, not insufficient_funds', async () => {
    const big = await startBitcoinResponder({ network: 'regtest', utxosLimit: 1000 });
    try {
      const bep = { ...ep, url: big.url };
      const a = newAgent();
      for (let i = 0; i < 600; i++) big.fund(a.from, 1000);
      const err = (await failure(() =>
        prepare(a, { to: otherAddress(), value: '480000', feeRateSatPerVbyte: 1 }, bep),
      )) as CustosError;
      expect(err).toBeInstanceOf(CustosError);
      expect(err).toMatchObject({ field: 'value' });
      expect(err.type).not.toBe('insufficient_funds');
      expect(err.detail).toMatch(
        /too many small UTXOs.*500 largest.*500000 sat.*all 600 spendable UTXOs hold 600000 sat/,
      );
      // More than all of them hold: insufficient funds, as with fewer UTXOs.
      const poor = (await failure(() =>
        prepare(a, { to: otherAddress(), value: '700000', feeRateSatPerVbyte: 1 }, bep),
      )) as CustosError;
      expect(poor).toMatchObject({ field: 'value', type: 'insufficient_funds' });
    } finally {
      await big.close();
    }
  });

  it('a transaction the node never saw, whose inputs are unspent, is unknown', async () => {
    const a = newAgent();
    node.fund(a.from, 30_000);
    const s = await signedFor(a);
    expect(await ops.status(ep, { txHash: s.txHash, signedTx: s.signedTx })).toEqual({ state: 'unknown' });
  });

  it('an Esplora that answers 404 for the status of a transaction it has: pending from its raw hex', async () => {
    const a = newAgent();
    node.fund(a.from, 30_000);
    const s = await signedFor(a);
    await ops.broadcast(ep, s);
    node.failNext(1, 404, 'Transaction not found', /^GET \/tx\/[0-9a-f]{64}\/status$/);
    expect(await ops.status(ep, { txHash: s.txHash, signedTx: s.signedTx })).toEqual({ state: 'pending' });
    expect(node.requests.slice(-2)).toEqual([`GET /tx/${s.txHash}/status`, `GET /tx/${s.txHash}/hex`]);
  });

  it('a bad signature is rejected by the node with bitcoind words', async () => {
    const a = newAgent();
    node.fund(a.from, 30_000);
    const s = await signedFor(a);
    // Another amount for the recipient after signing: the signature no longer covers it.
    const tx = bitcoin.Transaction.fromHex(s.signedTx);
    tx.outs[0]!.value -= 1n;
    const forged = { signedTx: tx.toHex(), txHash: tx.getId() };
    const err = (await failure(() => ops.broadcast(ep, forged))) as ChainRpcError;
    expect(err).toMatchObject({ rejected: true, alreadyKnown: false });
    expect(err.message).toMatch(/mandatory-script-verify-flag-failed/);
    expect(node.accepted.some((t) => t.txid === forged.txHash)).toBe(false);
  });

  it('a dust output is rejected (-26 dust)', async () => {
    const a = newAgent();
    node.fund(a.from, 30_000);
    const p = await prepare(a, { to: otherAddress(), value: '10000', feeRateSatPerVbyte: 1 });
    // Rebuild the PSBT with a 100 sat change output, then sign it as prepared (fee adjusted).
    const psbt = bitcoin.Psbt.fromBase64(p.unsigned.psbt, { network: REGTEST });
    const out = psbt.txOutputs[1]!;
    const rebuilt = new bitcoin.Psbt({ network: REGTEST });
    rebuilt.addInput({
      hash: psbt.txInputs[0]!.hash,
      index: psbt.txInputs[0]!.index,
      witnessUtxo: psbt.data.inputs[0]!.witnessUtxo!,
    });
    rebuilt.addOutput({ script: psbt.txOutputs[0]!.script, value: psbt.txOutputs[0]!.value });
    rebuilt.addOutput({ script: out.script, value: 100n });
    const s = sign(a, {
      ...p,
      unsigned: { ...p.unsigned, psbt: rebuilt.toBase64() },
      fee: p.fee + out.value - 100n,
    });
    const err = (await failure(() => ops.broadcast(ep, s))) as ChainRpcError;
    expect(err).toMatchObject({ rejected: true });
    expect(err.message).toMatch(/refused the transaction: dust \(-26\)/);
  });

  it('a 503 is a ChainRpcError that is not a refusal; the next call goes through', async () => {
    const a = newAgent();
    node.fund(a.from, 30_000);
    const s = await signedFor(a);
    node.failNext(1, 503);
    const err = await failure(() => ops.broadcast(ep, s));
    expect(err).toBeInstanceOf(ChainRpcError);
    expect(err).toMatchObject({ rejected: false, alreadyKnown: false });
    await ops.broadcast(ep, s);
    expect(node.mempool()).toContain(s.txHash);
    node.failNext(1, 502);
    expect(await failure(() => ops.status(ep, { txHash: s.txHash, signedTx: s.signedTx }))).toMatchObject({
      rejected: false,
    });
    node.failNext(1, 503);
    expect(await failure(() => prepare(a, { to: otherAddress(), value: '1000' }))).toMatchObject({
      rejected: false,
    });
  });

  it('a node that does not answer: ChainRpcError (timed out), not a refusal', async () => {
    const a = newAgent();
    node.fund(a.from, 30_000);
    const s = await signedFor(a);
    const quick = { ...ep, timeoutMs: 300 };
    node.setUnresponsive(true);
    try {
      const err = (await failure(() => ops.broadcast(quick, s))) as ChainRpcError;
      expect(err).toBeInstanceOf(ChainRpcError);
      expect(err).toMatchObject({ rejected: false, alreadyKnown: false });
      expect(err.message).toMatch(/timed out/);
      expect(
        await failure(() => ops.status(quick, { txHash: s.txHash, signedTx: s.signedTx })),
      ).toMatchObject({
        rejected: false,
      });
      expect(await failure(() => prepare(a, { to: otherAddress(), value: '1000' }, quick))).toMatchObject({
        rejected: false,
      });
    } finally {
      node.setUnresponsive(false);
    }
    expect(node.accepted.some((t) => t.txid === s.txHash)).toBe(false);
  });

  it('never puts the private key in a message or the prepared transfer', async () => {
    const a = newAgent();
    node.fund(a.from, 30_000);
    const p = await prepare(a, { to: otherAddress(), value: '10000', feeRateSatPerVbyte: 1 });
    const s = sign(a, p);
    const secret = a.privateKey.toString('hex');
    const text = JSON.stringify({ ...p, value: String(p.value), fee: String(p.fee) }) + JSON.stringify(s);
    expect(text).not.toContain(secret);
    const err = (await failure(() => ops.sign(a.privateKey, p, { chain, key: newAgent().key }))) as Error;
    expect(err.message).not.toContain(secret);
  });
});
