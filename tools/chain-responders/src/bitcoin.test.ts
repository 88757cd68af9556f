import { createHash, randomBytes } from 'node:crypto';
import type * as B from 'bitcoinjs-lib' with { 'resolution-mode': 'import' };
import { utils as tronUtils } from 'tronweb';
import { type BitcoinResponder, dustThreshold, startBitcoinResponder } from './bitcoin.js';

// The Bitcoin responder as a wallet sees it over HTTP: transactions built and signed here with
// bitcoinjs-lib and an independent signer (ethers' SigningKey, as tronweb ships it), then sent
// to `POST /tx`; the answers must be bitcoind's.

// eslint-disable-next-line @typescript-eslint/no-require-imports
const bitcoin = require('bitcoinjs-lib') as typeof B;
const { SigningKey } = tronUtils.ethersUtils;
const NET = bitcoin.networks.regtest;

let node: BitcoinResponder;
beforeAll(async () => {
  node = await startBitcoinResponder();
});
afterAll(() => node.close());

interface Wallet {
  priv: Buffer;
  pub: Buffer;
  address: string;
  script: Buffer;
}

function wallet(): Wallet {
  const priv = randomBytes(32);
  const pub = Buffer.from(SigningKey.computePublicKey(`0x${priv.toString('hex')}`, true).slice(2), 'hex');
  const p = bitcoin.payments.p2wpkh({ pubkey: pub, network: NET });
  return { priv, pub, address: p.address!, script: Buffer.from(p.output!) };
}

function signer(w: Wallet, tweak?: (digest: Buffer) => Buffer) {
  return {
    publicKey: w.pub,
    sign(hash: Uint8Array): Buffer {
      const digest = tweak ? tweak(Buffer.from(hash)) : Buffer.from(hash);
      const sig = new SigningKey(`0x${w.priv.toString('hex')}`).sign(`0x${digest.toString('hex')}`);
      return Buffer.concat([Buffer.from(sig.r.slice(2), 'hex'), Buffer.from(sig.s.slice(2), 'hex')]);
    },
  };
}

/** A transaction spending `inputs` (of `from`) to `outputs`, signed by `by` (default `from`). */
function build(
  from: Wallet,
  inputs: { txid: string; vout: number; value: bigint }[],
  outputs: { address?: string; script?: Buffer; value: bigint }[],
  o: { by?: Wallet; tweak?: (d: Buffer) => Buffer; manual?: boolean } = {},
): { hex: string; txid: string } {
  const psbt = new bitcoin.Psbt({ network: NET });
  for (const i of inputs) {
    psbt.addInput({ hash: i.txid, index: i.vout, witnessUtxo: { script: from.script, value: i.value } });
  }
  for (const out of outputs) {
    psbt.addOutput(
      out.script ? { script: out.script, value: out.value } : { address: out.address!, value: out.value },
    );
  }
  const by = o.by ?? from;
  // A wrong key (bitcoinjs-lib refuses to sign an input whose script is not the signer's) or
  // outputs above inputs (it refuses to extract them): the BIP-143 sighash signed and the
  // witness written by hand.
  if (by !== from || o.manual) {
    const tx = bitcoin.Transaction.fromBuffer(psbt.data.getTransaction());
    inputs.forEach((inp, idx) => {
      const code = bitcoin.payments.p2pkh({ hash: from.script.subarray(2) }).output!;
      const h = tx.hashForWitnessV0(idx, code, inp.value, bitcoin.Transaction.SIGHASH_ALL);
      const sig = bitcoin.script.signature.encode(signer(by).sign(h), bitcoin.Transaction.SIGHASH_ALL);
      tx.setWitness(idx, [sig, from.pub]);
    });
    return { hex: tx.toHex(), txid: tx.getId() };
  }
  psbt.signAllInputs(signer(from, o.tweak));
  psbt.finalizeAllInputs();
  const tx = psbt.extractTransaction(true);
  return { hex: tx.toHex(), txid: tx.getId() };
}

async function get(path: string): Promise<{ status: number; text: string; json: () => unknown }> {
  const res = await fetch(`${node.url}${path}`);
  const text = await res.text();
  return { status: res.status, text, json: () => JSON.parse(text) };
}

async function post(hex: string): Promise<{ status: number; text: string }> {
  const res = await fetch(`${node.url}/tx`, {
    method: 'POST',
    body: hex,
    headers: { 'content-type': 'text/plain' },
  });
  return { status: res.status, text: await res.text() };
}

function rpcError(code: number, message: string | RegExp) {
  const m = typeof message === 'string' ? message.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') : message.source;
  return new RegExp(`^sendrawtransaction RPC error: \\{"code":${code},"message":"${m}`);
}

describe('bitcoin responder (Esplora API)', () => {
  it('funds, lists UTXOs, accepts a valid spend, confirms it on mine, answers status and outspend', async () => {
    const a = wallet();
    const b = wallet();
    const f = node.fund(a.address, 50_000);
    const utxos = (await get(`/address/${a.address}/utxo`)).json() as Record<string, unknown>[];
    expect(utxos).toEqual([
      {
        txid: f.txid,
        vout: 0,
        value: 50_000,
        status: {
          confirmed: true,
          block_height: node.height(),
          block_hash: expect.any(String),
          block_time: expect.any(Number),
        },
      },
    ]);
    const t = build(
      a,
      [{ ...f, value: 50_000n }],
      [
        { address: b.address, value: 20_000n },
        { address: a.address, value: 29_000n },
      ],
    );
    expect(await post(t.hex)).toEqual({ status: 200, text: t.txid });
    expect(node.accepted.at(-1)).toMatchObject({ txid: t.txid, fee: 1_000n });
    expect((await get(`/tx/${t.txid}/status`)).json()).toEqual({ confirmed: false });
    expect((await get(`/tx/${t.txid}/hex`)).text).toBe(t.hex);
    expect((await get(`/tx/${f.txid}/outspend/0`)).json()).toEqual({
      spent: true,
      txid: t.txid,
      vin: 0,
      status: { confirmed: false },
    });
    // Mempool outputs are listed unconfirmed; the spent one is gone.
    expect((await get(`/address/${a.address}/utxo`)).json()).toEqual([
      { txid: t.txid, vout: 1, value: 29_000, status: { confirmed: false } },
    ]);
    const h = node.mine();
    expect((await get('/blocks/tip/height')).text).toBe(String(h));
    expect((await get(`/tx/${t.txid}/status`)).json()).toMatchObject({ confirmed: true, block_height: h });
    const full = (await get(`/tx/${t.txid}`)).json() as Record<string, unknown>;
    expect(full).toMatchObject({ txid: t.txid, fee: 1000, status: { confirmed: true, block_height: h } });
    expect((await get(`/address/${b.address}/utxo`)).json()).toMatchObject([
      { txid: t.txid, vout: 0, value: 20_000 },
    ]);
  });

  it('answers unknown transactions as electrs does', async () => {
    const id = randomBytes(32).toString('hex');
    expect((await get(`/tx/${id}/status`)).json()).toEqual({ confirmed: false });
    expect(await get(`/tx/${id}/hex`)).toMatchObject({ status: 404, text: 'Transaction not found' });
    expect(await get(`/tx/${id}`)).toMatchObject({ status: 404 });
    expect((await get(`/tx/${id}/outspend/0`)).json()).toEqual({ spent: false });
    expect(await get('/tx/nothex/status')).toMatchObject({ status: 400 });
  });

  it('refuses addresses of another network and malformed ones', async () => {
    const main = bitcoin.payments.p2wpkh({ pubkey: wallet().pub }).address!;
    expect(await get(`/address/${main}/utxo`)).toMatchObject({
      status: 400,
      text: 'Address on invalid network',
    });
    expect(await get('/address/bcrt1qnotanaddress/utxo')).toMatchObject({
      status: 400,
      text: 'Invalid Bitcoin address',
    });
  });

  it('refuses a signature by another key, and one over another sighash', async () => {
    const a = wallet();
    const f = node.fund(a.address, 50_000);
    const outs = [{ address: wallet().address, value: 49_000n }];
    const wrongKey = build(a, [{ ...f, value: 50_000n }], outs, { by: wallet() });
    const r1 = await post(wrongKey.hex);
    expect(r1.status).toBe(400);
    expect(r1.text).toMatch(rpcError(-26, /mandatory-script-verify-flag-failed/));
    const wrongHash = build(a, [{ ...f, value: 50_000n }], outs, {
      tweak: (d) => createHash('sha256').update(d).digest(),
    });
    expect((await post(wrongHash.hex)).text).toMatch(rpcError(-26, /mandatory-script-verify-flag-failed/));
    expect(node.accepted.some((t) => t.txid === wrongKey.txid || t.txid === wrongHash.txid)).toBe(false);
    // The same spend, rightly signed, goes through: the refusals were the signatures'.
    expect((await post(build(a, [{ ...f, value: 50_000n }], outs).hex)).status).toBe(200);
  });

  it('refuses a high-S signature (valid ECDSA, not standard) as bitcoind does', async () => {
    const a = wallet();
    const f = node.fund(a.address, 50_000);
    const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
    const t = build(a, [{ ...f, value: 50_000n }], [{ address: wallet().address, value: 49_000n }]);
    const tx = bitcoin.Transaction.fromHex(t.hex);
    const { signature, hashType } = bitcoin.script.signature.decode(tx.ins[0]!.witness[0]!);
    const s = BigInt(`0x${Buffer.from(signature.subarray(32)).toString('hex')}`);
    const flipped = Buffer.concat([
      Buffer.from(signature.subarray(0, 32)),
      Buffer.from((n - s).toString(16).padStart(64, '0'), 'hex'),
    ]);
    // bitcoinjs-lib's encoder insists on canonical S: DER-encode the high-S signature by hand.
    const der = (x: Buffer) => {
      let v = x;
      while (v.length > 1 && v[0] === 0 && v[1]! < 0x80) v = v.subarray(1);
      if (v[0]! >= 0x80) v = Buffer.concat([Buffer.from([0]), v]);
      return Buffer.concat([Buffer.from([0x02, v.length]), v]);
    };
    const body = Buffer.concat([der(flipped.subarray(0, 32)), der(flipped.subarray(32))]);
    const sig = Buffer.concat([Buffer.from([0x30, body.length]), body, Buffer.from([hashType])]);
    tx.setWitness(0, [sig, tx.ins[0]!.witness[1]!]);
    const r = await post(tx.toHex());
    expect(r.text).toMatch(
      rpcError(
        -26,
        /non-mandatory-script-verify-flag \(Non-canonical signature: S value is unnecessarily high\)/,
      ),
    );
    // The low-S original is accepted.
    expect((await post(t.hex)).status).toBe(200);
  });

  it('refuses double spends: in the mempool (conflict), then mined (missing or spent)', async () => {
    const a = wallet();
    const f = node.fund(a.address, 50_000);
    const one = build(a, [{ ...f, value: 50_000n }], [{ address: wallet().address, value: 49_000n }]);
    const two = build(a, [{ ...f, value: 50_000n }], [{ address: wallet().address, value: 48_000n }]);
    expect((await post(one.hex)).status).toBe(200);
    expect((await post(two.hex)).text).toMatch(rpcError(-26, 'txn-mempool-conflict'));
    node.mine();
    expect((await post(two.hex)).text).toMatch(rpcError(-25, 'bad-txns-inputs-missingorspent'));
    expect((await post(one.hex)).text).toMatch(rpcError(-27, 'Transaction outputs already in utxo set'));
  });

  it('a mined transaction sent again: -27 while an output is unspent, -25 once all are spent', async () => {
    const a = wallet();
    const r = wallet();
    const f = node.fund(a.address, 50_000);
    const one = build(a, [{ ...f, value: 50_000n }], [{ address: r.address, value: 49_000n }]);
    expect((await post(one.hex)).status).toBe(200);
    node.mine();
    expect((await post(one.hex)).text).toMatch(rpcError(-27, 'Transaction outputs already in utxo set'));
    const spend = build(
      r,
      [{ txid: one.txid, vout: 0, value: 49_000n }],
      [{ address: a.address, value: 48_000n }],
    );
    expect((await post(spend.hex)).status).toBe(200);
    node.mine();
    expect((await post(one.hex)).text).toMatch(rpcError(-25, 'bad-txns-inputs-missingorspent'));
  });

  it("answers electrs' 400 for an address with more UTXOs than its limit", async () => {
    const small = await startBitcoinResponder({ utxosLimit: 3 });
    try {
      const a = wallet();
      for (let i = 0; i < 3; i++) small.fund(a.address, 10_000);
      const ok = await fetch(`${small.url}/address/${a.address}/utxo`);
      expect(((await ok.json()) as unknown[]).length).toBe(3);
      small.fund(a.address, 10_000);
      const res = await fetch(`${small.url}/address/${a.address}/utxo`);
      expect(res.status).toBe(400);
      expect(await res.text()).toBe(
        'Too many unspent transaction outputs (>3). Contact support to raise limits.',
      );
    } finally {
      await small.close();
    }
  });

  it('sent again while in the mempool: the txid, as bitcoind answers', async () => {
    const a = wallet();
    const f = node.fund(a.address, 50_000);
    const t = build(a, [{ ...f, value: 50_000n }], [{ address: wallet().address, value: 49_000n }]);
    expect(await post(t.hex)).toEqual({ status: 200, text: t.txid });
    expect(await post(t.hex)).toEqual({ status: 200, text: t.txid });
    expect(node.accepted.filter((x) => x.txid === t.txid)).toHaveLength(1);
  });

  it('refuses outputs above inputs, dust outputs, fees under 1 sat/vB, missing inputs and garbage', async () => {
    const a = wallet();
    const f = node.fund(a.address, 50_000);
    const inp = [{ ...f, value: 50_000n }];
    const to = wallet().address;
    expect((await post(build(a, inp, [{ address: to, value: 50_001n }], { manual: true }).hex)).text).toMatch(
      rpcError(-26, /bad-txns-in-belowout/),
    );
    expect(
      (
        await post(
          build(a, inp, [
            { address: to, value: 293n },
            { address: to, value: 49_000n },
          ]).hex,
        )
      ).text,
    ).toMatch(rpcError(-26, 'dust'));
    // 294 sat is P2WPKH's dust limit: accepted as an output amount by that rule.
    expect(dustThreshold(a.script)).toBe(294n);
    expect(dustThreshold(bitcoin.payments.p2pkh({ pubkey: a.pub }).output!)).toBe(546n);
    expect(dustThreshold(bitcoin.payments.p2wsh({ hash: Buffer.alloc(32, 1) }).output!)).toBe(330n);
    // 110 vB, 100 sat of fee.
    expect((await post(build(a, inp, [{ address: to, value: 49_900n }]).hex)).text).toMatch(
      rpcError(-26, /min relay fee not met, 100 < 110/),
    );
    const ghost = [{ txid: randomBytes(32).toString('hex'), vout: 0, value: 50_000n }];
    expect((await post(build(a, ghost, [{ address: to, value: 40_000n }]).hex)).text).toMatch(
      rpcError(-25, 'bad-txns-inputs-missingorspent'),
    );
    expect((await post('zz')).text).toMatch(rpcError(-22, /TX decode failed/));
    expect(node.refusals.length).toBeGreaterThanOrEqual(5);
    // Finally a valid one at exactly 1 sat/vB: accepted.
    const ok = build(a, inp, [{ address: to, value: 49_890n }]);
    expect(await post(ok.hex)).toEqual({ status: 200, text: ok.txid });
  });

  it('evicts a mempool transaction (inputs unspent again), after which a rival spend of its input wins', async () => {
    const a = wallet();
    const f = node.fund(a.address, 50_000);
    const one = build(a, [{ ...f, value: 50_000n }], [{ address: wallet().address, value: 49_000n }]);
    const rival = build(a, [{ ...f, value: 50_000n }], [{ address: wallet().address, value: 48_000n }]);
    expect((await post(one.hex)).status).toBe(200);
    expect(node.submitRaw(rival.hex).text).toMatch(rpcError(-26, 'txn-mempool-conflict'));
    node.evict(one.txid);
    expect(node.mempool()).not.toContain(one.txid);
    expect(await get(`/tx/${one.txid}/hex`)).toMatchObject({ status: 404 });
    expect((await get(`/tx/${f.txid}/outspend/0`)).json()).toEqual({ spent: false });
    expect(node.submitRaw(rival.hex)).toEqual({ status: 200, text: rival.txid });
    expect((await get(`/tx/${f.txid}/outspend/0`)).json()).toMatchObject({ spent: true, txid: rival.txid });
    expect(() => node.evict(one.txid)).toThrow(/not in the mempool/);
  });

  it('fails only the requests a pattern names', async () => {
    node.failNext(
      1,
      400,
      'sendrawtransaction RPC error: {"code":-26,"message":"min relay fee not met"}',
      /^POST \/tx$/,
    );
    expect((await get('/blocks/tip/height')).status).toBe(200);
    expect(await post('00')).toEqual({
      status: 400,
      text: 'sendrawtransaction RPC error: {"code":-26,"message":"min relay fee not met"}',
    });
    expect((await post('00')).text).toMatch(rpcError(-22, /TX decode failed/));
  });

  it('answers fee estimates and injects failures: 503 once, then no answer at all', async () => {
    node.feeEstimates = { '1': 9, '6': 4.2 };
    expect((await get('/fee-estimates')).json()).toEqual({ '1': 9, '6': 4.2 });
    node.failNext(1, 503);
    expect((await get('/blocks/tip/height')).status).toBe(503);
    expect((await get('/blocks/tip/height')).status).toBe(200);
    node.setUnresponsive(true);
    const r = await fetch(`${node.url}/blocks/tip/height`, { signal: AbortSignal.timeout(200) }).catch(
      (e: Error) => e,
    );
    expect(r).toHaveProperty('name', 'TimeoutError');
    node.setUnresponsive(false);
    expect((await get('/blocks/tip/height')).status).toBe(200);
  });
});
