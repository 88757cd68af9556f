import * as CSL from '@emurgo/cardano-serialization-lib-nodejs';
import { startCardanoResponder, type CardanoResponder } from '@custos/chain-responders/cardano';
import { CustosError } from '@custos/service-kit';
import type { ChainRecord } from '../../chains/chain-types.js';
import {
  ChainRpcError,
  type ChainEndpoint,
  type GeneratedKey,
  type PrepareContext,
  type PreparedTransfer,
  type TransferInput,
} from '../../keys/chain-adapter.js';
import { DEFAULT_TTL_SLOTS, memoChunks, type CardanoUnsigned } from './cardano-transfer.js';
import { cardanoAdapter } from './index.js';

const adapter = cardanoAdapter;
const ops = adapter.transfers!;
const PROJECT = 'preprodTestProject1234';
// A preprod recipient (CIP-19's testnet base address) and a mainnet one.
const RECIPIENT =
  'addr_test1qz2fxv2umyhttkxyxp8x0dlpdt3k6cwng5pxj3jhsydzer3n0d3vllmyqwsx5wktcd8cc3sq835lu7drv2xwl2wywfgs68faae';
const MAINNET_ADDR = 'addr1vx2fxv2umyhttkxyxp8x0dlpdt3k6cwng5pxj3jhsydzers66hrl8';

function chainAt(url: string): ChainRecord {
  return {
    id: 'c1',
    name: 'cardano-preprod',
    displayName: 'Cardano Preprod',
    chainId: 0n,
    family: 'cardano',
    rpcUrl: url,
    wsUrl: '',
    explorerUrl: '',
    nativeCurrency: 'ADA',
    nativeDecimals: 6,
    isTestnet: true,
    isEnabled: true,
    createdAt: new Date(),
    updatedAt: new Date(),
  };
}

let node: CardanoResponder;
let chain: ChainRecord;
let endpoint: ChainEndpoint;
let key: GeneratedKey;
let from: string;
let inUse: Set<string>;

function ctx(): PrepareContext {
  return {
    endpoint,
    key: { address: key.address, publicKey: key.publicKey },
    from,
    inputsInUse: () => Promise.resolve(inUse),
  };
}

function input(o: Partial<TransferInput>): TransferInput {
  return { to: RECIPIENT, value: '2000000', ...o };
}

async function prepared(o: Partial<TransferInput> = {}): Promise<PreparedTransfer<CardanoUnsigned>> {
  return (await ops.prepare(ctx(), ops.parse(input(o), chain))) as PreparedTransfer<CardanoUnsigned>;
}

function signed(p: PreparedTransfer) {
  return ops.sign(key.privateKey, p, { chain, key }) as { signedTx: string; txHash: string };
}

/** The refusal `fn` throws: a CustosError naming a field. */
async function refusal(fn: () => unknown): Promise<CustosError> {
  try {
    await fn();
  } catch (e) {
    expect(e).toBeInstanceOf(CustosError);
    return e as CustosError;
  }
  throw new Error('expected a refusal');
}

async function rpcError(fn: () => Promise<unknown>): Promise<ChainRpcError> {
  try {
    await fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ChainRpcError);
    return e as ChainRpcError;
  }
  throw new Error('expected a ChainRpcError');
}

/** The signed transaction decoded and checked with the library, independently of the adapter. */
function verifySigned(signedTx: string, txHash: string, publicKey: string) {
  const tx = CSL.FixedTransaction.from_hex(signedTx);
  const hash = tx.transaction_hash();
  expect(hash.to_hex()).toBe(txHash);
  const vkeys = tx.witness_set().vkeys()!;
  expect(vkeys.len()).toBe(1);
  const w = vkeys.get(0);
  expect(w.vkey().public_key().to_hex()).toBe(publicKey);
  expect(CSL.PublicKey.from_hex(publicKey).verify(hash.to_bytes(), w.signature())).toBe(true);
  return tx;
}

beforeEach(async () => {
  node = await startCardanoResponder({ networkId: 0, projectId: PROJECT });
  const u = new URL(node.url);
  u.username = PROJECT;
  chain = chainAt(u.toString());
  endpoint = { chain, url: chain.rpcUrl, timeoutMs: 3000 };
  key = adapter.generate();
  from = adapter.addressFor!({ address: key.address, publicKey: key.publicKey }, chain);
  inUse = new Set();
});

afterEach(async () => {
  await node.close();
});

describe('cardano transfers against a Blockfrost responder', () => {
  it('prepares, signs, broadcasts and follows an ADA payment with a CIP-20 memo to confirmed', async () => {
    const ref = node.fund(from, 10_000_000n);
    const tip = node.tip().slot;
    const p = await prepared({ value: '2.0', memo: 'invoice 42' });
    expect(p.value).toBe(2_000_000n);
    expect(p.to).toBe(RECIPIENT);
    expect(p.inputs).toEqual([ref.replace('#', ':')]);
    expect(p.expiry).toEqual({ kind: 'slot', value: BigInt(tip + DEFAULT_TTL_SLOTS) });
    expect(p.fee).toBeGreaterThan(155_381n);
    expect(p.fee).toBeLessThan(200_000n);
    expect(p.details.memo).toBe('invoice 42');

    const s = signed(p);
    const tx = verifySigned(s.signedTx, s.txHash, key.publicKey);
    const body = tx.body();
    expect(body.ttl_bignum()!.to_str()).toBe(String(tip + DEFAULT_TTL_SLOTS));
    expect(body.fee().to_str()).toBe(p.fee.toString());
    expect(body.outputs().get(0).address().to_bech32()).toBe(RECIPIENT);
    expect(body.outputs().get(0).amount().coin().to_str()).toBe('2000000');
    expect(body.outputs().get(1).address().to_bech32()).toBe(from);
    expect(BigInt(body.outputs().get(1).amount().coin().to_str())).toBe(10_000_000n - 2_000_000n - p.fee);
    const msg = tx
      .auxiliary_data()!
      .metadata()!
      .get(CSL.BigNum.from_str('674'))!
      .as_map()
      .get(CSL.TransactionMetadatum.new_text('msg'))
      .as_list();
    expect(msg.get(0).as_text()).toBe('invoice 42');
    // The fee covers the ledger's linear fee over the signed bytes.
    expect(p.fee).toBeGreaterThanOrEqual(44n * BigInt(s.signedTx.length / 2) + 155_381n);

    await ops.broadcast(endpoint, s);
    const seen = node.submitted.get(s.txHash)!;
    expect(seen.signers).toEqual([key.publicKey]);
    expect(seen.memo).toEqual(['invoice 42']);
    expect(await ops.status(endpoint, { ...s, expiry: p.expiry })).toEqual({ state: 'pending' });

    const block = node.produceBlock();
    expect(await ops.status(endpoint, { ...s, expiry: p.expiry })).toEqual({
      state: 'confirmed',
      block: BigInt(block.height),
      fee: p.fee,
    });
    expect(node.balanceOf(RECIPIENT)).toBe(2_000_000n);
    expect(node.balanceOf(from)).toBe(8_000_000n - p.fee);
    // Blockfrost's project id went as the `project_id` header, never as Basic auth.
    for (const r of node.requests) {
      expect(r.headers.project_id).toBe(PROJECT);
      expect(r.headers.authorization).toBeUndefined();
    }
    expect(node.requests.find((r) => r.path === '/tx/submit')!.headers['content-type']).toBe(
      'application/cbor',
    );
  });

  it('signs offline (sign-only): the CBOR parses and its witness verifies; nothing reaches the node', async () => {
    node.fund(from, 5_000_000n);
    const p = await prepared({ value: '1500000' });
    const before = node.requests.length;
    const s = signed(p);
    verifySigned(s.signedTx, s.txHash, key.publicKey);
    // The prepared transfer survives JSON (bigints as strings, as the flow may store it) and signs
    // to the same bytes.
    const again = signed(
      JSON.parse(JSON.stringify(p, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))),
    );
    expect(again).toEqual(s);
    expect(node.requests.length).toBe(before);
    expect(node.submitted.size).toBe(0);
  });

  it('refuses to sign with another key than the one prepared for', async () => {
    node.fund(from, 5_000_000n);
    const p = await prepared();
    const other = adapter.generate();
    expect(() => ops.sign(other.privateKey, p, { chain, key })).toThrow(/not the one/);
  });

  it('signs only the body prepared: recipient, amount, fee and network are compared first', async () => {
    node.fund(from, 10_000_000n);
    const p = await prepared({ value: '2000000' });
    const other = await prepared({ value: '3000000', to: from });
    const mainnet = { ...chain, name: 'cardano', isTestnet: false };
    const tampered: [PreparedTransfer<CardanoUnsigned>, ChainRecord, RegExp][] = [
      [{ ...p, value: 2_500_000n }, chain, /prepared amount/],
      [{ ...p, to: from }, chain, /prepared recipient/],
      [{ ...p, fee: p.fee + 1n }, chain, /prepared fee/],
      [{ ...p, unsigned: { ...p.unsigned, body: other.unsigned.body } }, chain, /prepared/],
      [{ ...p, inputs: ['ab'.repeat(32) + ':0'] }, chain, /inputs/],
      [p, mainnet, /network/],
    ];
    for (const [t, c, why] of tampered) {
      expect(() => ops.sign(key.privateKey, t, { chain: c, key })).toThrow(why);
    }
    expect(node.submitted.size).toBe(0);
    expect(() => signed(p)).not.toThrow();
  });

  it('spends ADA-only UTxOs not held by other transactions, largest first', async () => {
    const small = node.fund(from, 3_000_000n);
    const big = node.fund(from, 9_000_000n);
    node.fund(from, 50_000_000n, { ['ab'.repeat(28) + '746f6b656e']: 100n });
    inUse = new Set([big.replace('#', ':')]);
    const p = await prepared({ value: '1500000' });
    expect(p.inputs).toEqual([small.replace('#', ':')]);
    await ops.broadcast(endpoint, signed(p));
    node.produceBlock();
    // The token UTxO is untouched.
    expect(
      node.utxosOf(from).some((u) => Object.keys(u.assets).length === 1 && u.lovelace === 50_000_000n),
    ).toBe(true);
  });

  it('adds the next input rather than burn change below the minimum UTxO; refuses a burn above 0.2 ADA', async () => {
    // 3 ADA, send 2: the 0.8 ADA left is below a change output's minimum: refused, nothing burnt.
    const three = node.fund(from, 3_000_000n);
    const e = await refusal(() => prepared({ value: '2.0' }));
    expect(e).toMatchObject({ field: 'value' });
    expect(e.type).not.toBe('insufficient_funds');
    expect(e.detail).toMatch(/burnt as fee.*at most 200000 lovelace/);
    // 3 + 1.5 ADA, send 2: both inputs, the change returned.
    const more = node.fund(from, 1_500_000n);
    const p = await prepared({ value: '2.0' });
    expect(p.inputs.sort()).toEqual([three, more].map((r) => r.replace('#', ':')).sort());
    expect(p.fee).toBeLessThan(200_000n);
    const s = signed(p);
    const body = verifySigned(s.signedTx, s.txHash, key.publicKey).body();
    expect(body.outputs().len()).toBe(2);
    expect(BigInt(body.outputs().get(1).amount().coin().to_str())).toBe(4_500_000n - 2_000_000n - p.fee);
    await ops.broadcast(endpoint, s);
    node.produceBlock();
    expect(node.balanceOf(from)).toBe(2_500_000n - p.fee);
  });

  it('refuses 10 ADA sending 9.2 (0.6 ADA would burn) and lets a small remainder go to the fee', async () => {
    node.fund(from, 10_000_000n);
    const e = await refusal(() => prepared({ value: '9.2' }));
    expect(e).toMatchObject({ field: 'value' });
    expect(e.detail).toMatch(/would leave \d+ lovelace over the fee/);
    // 9.7 ADA: about 0.13 ADA over the minimum fee, under the 0.2 ADA cap: it goes to the fee.
    const p = await prepared({ value: '9.7' });
    expect(p.fee).toBe(300_000n);
    const s = signed(p);
    expect(verifySigned(s.signedTx, s.txHash, key.publicKey).body().outputs().len()).toBe(1);
    await ops.broadcast(endpoint, s);
    expect(node.submitted.get(s.txHash)!.fee).toBe(300_000n);
  });

  it('reads every page of the UTxOs (Blockfrost gives 100 a page)', async () => {
    for (let i = 0; i < 120; i++) node.fund(from, 1_000_000n);
    const big = node.fund(from, 50_000_000n); // the 121st: on page 2
    const p = await prepared({ value: '30.0' });
    expect(p.inputs).toEqual([big.replace('#', ':')]);
    const pages = node.requests.filter((r) => r.path === `/addresses/${from}/utxos`);
    expect(pages).toHaveLength(2);
  });

  it('refuses what the balance cannot pay: insufficient_funds naming value, nothing sent', async () => {
    // Never funded: Blockfrost answers 404 for the address.
    let e = await refusal(() => prepared());
    expect(e).toMatchObject({ kind: 'invalid_argument', field: 'value', type: 'insufficient_funds' });
    node.fund(from, 3_000_000n);
    e = await refusal(() => prepared({ value: '5000000' }));
    expect(e).toMatchObject({ field: 'value', type: 'insufficient_funds' });
    // The amount fits, the fee does not.
    e = await refusal(() => prepared({ value: '2950000' }));
    expect(e).toMatchObject({ field: 'value', type: 'insufficient_funds' });
    // Token-carrying UTxOs do not count.
    node.fund(from, 100_000_000n, { ['cd'.repeat(28)]: 1n });
    e = await refusal(() => prepared({ value: '10.5' }));
    expect(e).toMatchObject({ field: 'value', type: 'insufficient_funds' });
    expect(node.submitted.size).toBe(0);
  });

  it('refuses an output below the minimum UTxO (400 value)', async () => {
    node.fund(from, 10_000_000n);
    const e = await refusal(() => prepared({ value: '500000' }));
    expect(e).toMatchObject({ field: 'value' });
    expect(e.type).not.toBe('insufficient_funds');
    expect(e.detail).toMatch(/minimum UTxO/);
  });

  it('refuses malformed, wrong-network and stake addresses (400 to)', () => {
    for (const to of [
      'addr_test1qz2fxv2umyhttkxyxp8x0dlpdt3k6cwng5pxj3jhsydzer3n0d3vllmyqwsx5wktcd8cc3sq835lu7drv2xwl2wywfgs68faaf',
      MAINNET_ADDR,
      'stake_test1uqehkck0lajq8gr28t9uxnuvgcqrc6070x3k9r8048z8y5gfjf2ew',
      '0x2c7536E3605D9C16a7a3D7b1898e529396a65c23',
      '',
    ]) {
      let err: unknown;
      try {
        ops.parse(input({ to }), chain);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(CustosError);
      expect(err).toMatchObject({ field: 'to' });
    }
  });

  it('refuses fields Cardano does not take, naming each', () => {
    const cases: [Partial<TransferInput>, string][] = [
      [{ data: '0xdeadbeef' }, 'data'],
      [{ destinationTag: 7 }, 'destination_tag'],
      [{ feeRateSatPerVbyte: 5 }, 'fee_rate_sat_per_vbyte'],
      [{ feeLimitSun: 1000 }, 'fee_limit_sun'],
      [{ tokenMint: 'ab'.repeat(28) }, 'token_mint'],
      [{ memo: 'x'.repeat(1025) }, 'memo'],
      [{ ttl: -5 }, 'ttl'],
      [{ ttl: 1.5 }, 'ttl'],
      [{ value: '0' }, 'value'],
      [{ value: '-1' }, 'value'],
      [{ value: '0x10' }, 'value'],
      [{ value: '1.0000001' }, 'value'],
    ];
    for (const [o, field] of cases) {
      expect(() => ops.parse(input(o), chain)).toThrow(CustosError);
      try {
        ops.parse(input(o), chain);
      } catch (e) {
        expect((e as CustosError).field).toBe(field);
      }
    }
    expect(ops.parse(input({ value: '1.5', data: '', memo: '', tokenMint: '' }), chain)).toEqual({
      to: RECIPIENT,
      value: '1.5',
    });
  });

  it('splits a long memo into CIP-20 chunks of at most 64 bytes without splitting a character', async () => {
    const memo = `${'é'.repeat(40)}${'z'.repeat(70)}`;
    const chunks = memoChunks(memo);
    expect(chunks.join('')).toBe(memo);
    for (const c of chunks) expect(Buffer.byteLength(c)).toBeLessThanOrEqual(64);
    node.fund(from, 10_000_000n);
    const s = signed(await prepared({ memo }));
    await ops.broadcast(endpoint, s);
    expect(node.submitted.get(s.txHash)!.memo!.join('')).toBe(memo);
  });

  it('takes an absolute ttl after the tip and refuses one at or before it (400 ttl)', async () => {
    node.fund(from, 10_000_000n);
    const tip = node.tip().slot;
    const p = await prepared({ ttl: tip + 50 });
    expect(p.expiry).toEqual({ kind: 'slot', value: BigInt(tip + 50) });
    const e = await refusal(() => prepared({ ttl: tip }));
    expect(e).toMatchObject({ field: 'ttl' });
    // At most a day (86,400 slots) past the tip: the inputs are held until the ttl.
    expect((await prepared({ ttl: tip + 86_400 })).expiry).toEqual({
      kind: 'slot',
      value: BigInt(tip + 86_400),
    });
    const far = await refusal(() => prepared({ ttl: tip + 86_401 }));
    expect(far).toMatchObject({ field: 'ttl' });
    expect(far.detail).toMatch(/86400 slots/);
  });

  it('maps a double spend to a rejection and a resend of the same bytes to already-known', async () => {
    node.fund(from, 10_000_000n);
    const a = signed(await prepared({ value: '2000000' }));
    const b = signed(await prepared({ value: '3000000' })); // the same input: the flow would have refused it
    await ops.broadcast(endpoint, a);
    const again = await rpcError(() => ops.broadcast(endpoint, a));
    expect(again).toMatchObject({ alreadyKnown: true, rejected: false });
    // B's input is spent by A in the mempool only: not (yet) a refusal, A may still be dropped.
    const pooled = await rpcError(() => ops.broadcast(endpoint, b));
    expect(pooled).toMatchObject({ rejected: false, alreadyKnown: false });
    expect(pooled.message).toMatch(/BadInputsUTxO/);
    node.produceBlock();
    expect(await rpcError(() => ops.broadcast(endpoint, a))).toMatchObject({ alreadyKnown: true });
    // A block spent B's input by A: a refusal.
    const e = await rpcError(() => ops.broadcast(endpoint, b));
    expect(e).toMatchObject({ rejected: true, alreadyKnown: false });
    expect(e.message).toMatch(new RegExp(`BadInputsUTxO.*spent on chain by ${a.txHash}`));
    // B can never be included now: its input is spent by A.
    const st = await ops.status(endpoint, { ...b });
    expect(st.state).toBe('expired');
    expect(st).toMatchObject({ reason: expect.stringContaining(a.txHash) });
  });

  it('without mempool endpoints, a re-send answered BadInputsUTxO is not a refusal (the ttl decides)', async () => {
    node.mempoolApi(false);
    node.fund(from, 10_000_000n);
    const p = await prepared({ value: '2000000' });
    const a = signed(p);
    await ops.broadcast(endpoint, a);
    // The node holds A; the backend cannot say so (404 on /mempool/*), no block spent its inputs.
    const again = await rpcError(() => ops.broadcast(endpoint, a));
    expect(again).toMatchObject({ rejected: false, alreadyKnown: false });
    expect(again.message).toMatch(/BadInputsUTxO.*no block spent/);
    expect(node.requests.some((r) => r.path === `/mempool/${a.txHash}`)).toBe(true);
    expect(await ops.status(endpoint, { ...a, expiry: p.expiry })).toEqual({ state: 'unknown' });
    node.produceBlock();
    expect(await ops.status(endpoint, { ...a, expiry: p.expiry })).toMatchObject({ state: 'confirmed' });
  });

  it('reads the tip first: a block including the transaction before its ttl, during the reads, is not expired', async () => {
    node.mempoolApi(false);
    node.fund(from, 10_000_000n);
    const tip = node.tip().slot;
    const p = await prepared({ ttl: tip + 30 });
    const s = signed(p);
    await ops.broadcast(endpoint, s);
    node.advance(28); // two slots before the ttl; still in the node's mempool
    const [inHash] = p.inputs[0]!.split(':');
    let fired = false;
    node.afterAnswer((r) => {
      // Right after the last read of the transaction's state: a block at slot ttl - 1 includes
      // it, and the tip moves past the ttl.
      if (!fired && r.path === `/txs/${inHash}/utxos`) {
        fired = true;
        node.produceBlock(1);
        node.advance(5);
      }
    });
    const st = await ops.status(endpoint, { ...s, expiry: p.expiry });
    expect(fired).toBe(true);
    expect(st).toEqual({ state: 'unknown' });
    node.afterAnswer(undefined);
    expect(node.submitted.get(s.txHash)!.block!.slot).toBe(tip + 29);
    expect(await ops.status(endpoint, { ...s, expiry: p.expiry })).toMatchObject({ state: 'confirmed' });
  });

  it('reports expired once the tip reaches the ttl, and the node refuses the late bytes', async () => {
    node.fund(from, 10_000_000n);
    const tip = node.tip().slot;
    const p = await prepared({ ttl: tip + 30 });
    const s = signed(p);
    expect(await ops.status(endpoint, { ...s, expiry: p.expiry })).toEqual({ state: 'unknown' });
    node.advance(30);
    expect(await ops.status(endpoint, { ...s, expiry: p.expiry })).toMatchObject({ state: 'expired' });
    const e = await rpcError(() => ops.broadcast(endpoint, s));
    expect(e.rejected).toBe(true);
    expect(e.message).toMatch(/OutsideValidityIntervalUTxO/);
  });

  it('drops a broadcast transaction from the mempool when its ttl passes: expired', async () => {
    node.fund(from, 10_000_000n);
    const p = await prepared({ ttl: node.tip().slot + 10 });
    const s = signed(p);
    await ops.broadcast(endpoint, s);
    expect(await ops.status(endpoint, { ...s, expiry: p.expiry })).toEqual({ state: 'pending' });
    node.advance(10);
    expect(await ops.status(endpoint, { ...s, expiry: p.expiry })).toMatchObject({ state: 'expired' });
  });

  it('treats a 503 as a failed call (not a refusal) and succeeds when the node answers again', async () => {
    node.fund(from, 10_000_000n);
    node.failNext(1, 503);
    const pe = await rpcError(() => prepared());
    expect(pe.rejected).toBe(false);
    const s = signed(await prepared());
    node.failNext(1, 503);
    const be = await rpcError(() => ops.broadcast(endpoint, s));
    expect(be).toMatchObject({ rejected: false, alreadyKnown: false });
    await ops.broadcast(endpoint, s);
    expect(node.mempool()).toEqual([s.txHash]);
  });

  it('times out on a node that stops answering: ChainRpcError, not rejected', async () => {
    node.fund(from, 10_000_000n);
    const s = signed(await prepared());
    node.hang(true);
    const quick = { ...endpoint, timeoutMs: 300 };
    const t0 = Date.now();
    const e = await rpcError(() => ops.broadcast(quick, s));
    // The endpoint's timeout applied (not the 3 s of the others, not at once).
    expect(Date.now() - t0).toBeGreaterThanOrEqual(290);
    expect(Date.now() - t0).toBeLessThan(2500);
    expect(e.rejected).toBe(false);
    expect(e.message).toMatch(/timed out/);
    const st = await rpcError(() => ops.status(quick, s));
    expect(st.rejected).toBe(false);
    node.hang(false);
  });

  it('sends no credentials Blockfrost would refuse: a missing project id is 403', async () => {
    node.fund(from, 10_000_000n);
    const bare = { ...endpoint, url: node.url };
    const e = await rpcError(() => ops.prepare({ ...ctx(), endpoint: bare }, input({})));
    expect(e.message).toMatch(/403.*Missing project token/);
  });
});
