import * as CSL from '@emurgo/cardano-serialization-lib-nodejs';
import { randomBytes } from 'node:crypto';
import { MAINNET_PARAMETERS, startCardanoResponder, type CardanoResponder } from './cardano.js';

interface Wallet {
  sk: CSL.PrivateKey;
  address: string;
}

function wallet(networkId = 0): Wallet {
  const sk = CSL.PrivateKey.from_normal_bytes(randomBytes(32));
  const address = CSL.EnterpriseAddress.new(networkId, CSL.Credential.from_keyhash(sk.to_public().hash()))
    .to_address()
    .to_bech32();
  return { sk, address };
}

const bn = (v: bigint | number): CSL.BigNum => CSL.BigNum.from_str(String(v));

/** A payment built by hand (no builder): the inputs, outputs, fee and ttl as given, signed by `signers`. */
function tx(o: {
  inputs: string[];
  outputs: { address: string; lovelace: bigint }[];
  fee: bigint;
  ttl?: number;
  signers: CSL.PrivateKey[];
  tamper?: boolean;
}): { bytes: Buffer; hash: string } {
  const ins = CSL.TransactionInputs.new();
  for (const ref of o.inputs) {
    const [h, i] = ref.split('#');
    ins.add(CSL.TransactionInput.new(CSL.TransactionHash.from_hex(h!), Number(i)));
  }
  const outs = CSL.TransactionOutputs.new();
  for (const x of o.outputs) {
    outs.add(CSL.TransactionOutput.new(CSL.Address.from_bech32(x.address), CSL.Value.new(bn(x.lovelace))));
  }
  const body = CSL.TransactionBody.new_tx_body(ins, outs, bn(o.fee));
  if (o.ttl !== undefined) body.set_ttl(bn(o.ttl));
  const ft = CSL.FixedTransaction.new_from_body_bytes(body.to_bytes());
  const hash = ft.transaction_hash();
  for (const sk of o.signers) {
    const w = CSL.make_vkey_witness(hash, sk);
    if (o.tamper) {
      const sig = Buffer.from(w.signature().to_bytes());
      sig[0] = sig[0]! ^ 1;
      ft.add_vkey_witness(CSL.Vkeywitness.new(w.vkey(), CSL.Ed25519Signature.from_bytes(sig)));
    } else {
      ft.add_vkey_witness(w);
    }
  }
  return { bytes: Buffer.from(ft.to_bytes()), hash: hash.to_hex() };
}

/** The exact fee of a one-witness payment: size-dependent, so built twice. */
function payment(
  w: Wallet,
  input: string,
  inLovelace: bigint,
  to: string,
  amount: bigint,
  extra: Partial<Parameters<typeof tx>[0]> = {},
): { bytes: Buffer; hash: string; fee: bigint } {
  const draft = tx({
    inputs: [input],
    outputs: [
      { address: to, lovelace: amount },
      { address: w.address, lovelace: inLovelace - amount - 200_000n },
    ],
    fee: 200_000n,
    ttl: 10 ** 9,
    signers: [w.sk],
    ...extra,
  });
  const fee = 44n * BigInt(draft.bytes.length) + 155_381n;
  const t = tx({
    inputs: [input],
    outputs: [
      { address: to, lovelace: amount },
      { address: w.address, lovelace: inLovelace - amount - fee },
    ],
    fee,
    ttl: 10 ** 9,
    signers: [w.sk],
    ...extra,
  });
  return { ...t, fee };
}

async function call(
  node: CardanoResponder,
  path: string,
  o: { method?: string; body?: Uint8Array; type?: string; projectId?: string } = {},
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- Blockfrost's answers, read field by field
): Promise<{ status: number; json: any }> {
  const headers: Record<string, string> = {};
  if (o.type) headers['content-type'] = o.type;
  if (o.projectId) headers.project_id = o.projectId;
  const res = await fetch(`${node.url}${path}`, { method: o.method ?? 'GET', body: o.body, headers });
  return { status: res.status, json: await res.json() };
}

const submit = (node: CardanoResponder, bytes: Uint8Array) =>
  call(node, '/tx/submit', { method: 'POST', body: bytes, type: 'application/cbor' });

let node: CardanoResponder;
let alice: Wallet;
let bob: Wallet;
let funded: string;

beforeEach(async () => {
  node = await startCardanoResponder();
  alice = wallet();
  bob = wallet();
  funded = node.fund(alice.address, 10_000_000n);
});

afterEach(async () => {
  await node.close();
});

describe('Cardano responder (Blockfrost API)', () => {
  it('serves the tip, the parameters and an address UTxOs in pages, 404 for an address never seen', async () => {
    const tip = await call(node, '/blocks/latest');
    expect(tip.status).toBe(200);
    expect(tip.json).toMatchObject({
      slot: node.tip().slot,
      height: node.tip().height,
      hash: node.tip().hash,
    });
    const p = await call(node, '/epochs/latest/parameters');
    expect(p.json).toMatchObject({
      min_fee_a: 44,
      min_fee_b: 155381,
      coins_per_utxo_size: '4310',
      max_tx_size: 16384,
    });
    for (let i = 0; i < 104; i++) node.fund(bob.address, 1_000_000n + BigInt(i));
    const p1 = await call(node, `/addresses/${bob.address}/utxos?page=1`);
    const p2 = await call(node, `/addresses/${bob.address}/utxos?page=2`);
    expect(p1.json).toHaveLength(100);
    expect(p2.json).toHaveLength(4);
    expect(p1.json[0]).toMatchObject({
      address: bob.address,
      output_index: 0,
      amount: [{ unit: 'lovelace' }],
    });
    const missing = await call(node, `/addresses/${wallet().address}/utxos`);
    expect(missing).toEqual({
      status: 404,
      json: { status_code: 404, error: 'Not Found', message: 'The requested component has not been found.' },
    });
  });

  it('accepts a correctly signed payment, holds it in the mempool, and includes it in the next block', async () => {
    const t = payment(alice, funded, 10_000_000n, bob.address, 3_000_000n);
    const r = await submit(node, t.bytes);
    expect(r).toEqual({ status: 200, json: t.hash });
    expect(node.mempool()).toEqual([t.hash]);
    expect(node.submitted.get(t.hash)!.signers).toEqual([alice.sk.to_public().to_hex()]);
    expect((await call(node, `/txs/${t.hash}`)).status).toBe(404);
    expect((await call(node, `/mempool/${t.hash}`)).status).toBe(200);
    const b = node.produceBlock();
    const got = await call(node, `/txs/${t.hash}`);
    expect(got.json).toMatchObject({
      hash: t.hash,
      block_height: b.height,
      slot: b.slot,
      fees: t.fee.toString(),
    });
    expect((await call(node, `/txs/${t.hash}/cbor`)).json).toEqual({ cbor: t.bytes.toString('hex') });
    expect(node.balanceOf(bob.address)).toBe(3_000_000n);
    expect(node.balanceOf(alice.address)).toBe(7_000_000n - t.fee);
    const spent = await call(node, `/txs/${funded.split('#')[0]}/utxos`);
    expect(spent.json.outputs[0].consumed_by_tx).toBe(t.hash);
  });

  it('without mempool endpoints: /mempool/* 404, the node still holds the transaction and refuses its re-send', async () => {
    node.mempoolApi(false);
    const t = payment(alice, funded, 10_000_000n, bob.address, 3_000_000n);
    expect((await submit(node, t.bytes)).status).toBe(200);
    const m = await call(node, `/mempool/${t.hash}`);
    expect(m).toEqual({
      status: 404,
      json: {
        status_code: 404,
        error: 'Not Found',
        message: 'Invalid path. Please check https://docs.blockfrost.io/',
      },
    });
    expect(node.mempool()).toEqual([t.hash]);
    expect((await submit(node, t.bytes)).json.message).toMatch(/BadInputsUTxO/);
    node.mempoolApi(true);
    expect((await call(node, `/mempool/${t.hash}`)).status).toBe(200);
  });

  it('produces a block a given number of slots on, and calls a hook after each answer', async () => {
    const seen: string[] = [];
    node.afterAnswer((r) => seen.push(`${r.method} ${r.path}`));
    const t = payment(alice, funded, 10_000_000n, bob.address, 3_000_000n);
    await submit(node, t.bytes);
    const before = node.tip().slot;
    const b = node.produceBlock(1);
    expect(b.slot).toBe(before + 1);
    expect(node.submitted.get(t.hash)!.block!.slot).toBe(before + 1);
    await call(node, '/blocks/latest');
    expect(seen).toEqual(['POST /tx/submit', 'GET /blocks/latest']);
    node.afterAnswer(undefined);
    await call(node, '/blocks/latest');
    expect(seen).toHaveLength(2);
  });

  it('refuses a bad signature (InvalidWitnessesUTXOW) and a missing witness (MissingVKeyWitnessesUTXOW)', async () => {
    const bad = payment(alice, funded, 10_000_000n, bob.address, 3_000_000n, { tamper: true });
    const r = await submit(node, bad.bytes);
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ status_code: 400, error: 'Bad Request' });
    expect(r.json.message).toMatch(/InvalidWitnessesUTXOW/);
    const other = payment(alice, funded, 10_000_000n, bob.address, 3_000_000n, { signers: [bob.sk] });
    const r2 = await submit(node, other.bytes);
    expect(r2.json.message).toMatch(/MissingVKeyWitnessesUTXOW/);
    expect(r2.json.message).toContain(alice.sk.to_public().hash().to_hex());
    expect(node.mempool()).toEqual([]);
  });

  it('refuses a double spend, in the mempool and after the block (BadInputsUTxO)', async () => {
    const a = payment(alice, funded, 10_000_000n, bob.address, 3_000_000n);
    const b = payment(alice, funded, 10_000_000n, bob.address, 4_000_000n);
    expect((await submit(node, a.bytes)).status).toBe(200);
    const r = await submit(node, b.bytes);
    expect(r.status).toBe(400);
    expect(r.json.message).toMatch(/BadInputsUTxO/);
    node.produceBlock();
    expect((await submit(node, b.bytes)).json.message).toMatch(/BadInputsUTxO/);
    expect((await submit(node, a.bytes)).json.message).toMatch(/BadInputsUTxO/);
    const unknown = payment(alice, `${'11'.repeat(32)}#0`, 10_000_000n, bob.address, 3_000_000n);
    expect((await submit(node, unknown.bytes)).json.message).toMatch(/BadInputsUTxO/);
  });

  it('refuses unbalanced value, a fee below the minimum and an output below min-UTxO', async () => {
    const unbalanced = tx({
      inputs: [funded],
      outputs: [{ address: bob.address, lovelace: 9_900_000n }],
      fee: 200_000n,
      signers: [alice.sk],
    });
    expect((await submit(node, unbalanced.bytes)).json.message).toMatch(/ValueNotConservedUTxO/);
    const cheap = tx({
      inputs: [funded],
      outputs: [{ address: bob.address, lovelace: 9_900_000n }],
      fee: 100_000n,
      signers: [alice.sk],
    });
    expect((await submit(node, cheap.bytes)).json.message).toMatch(/FeeTooSmallUTxO/);
    const dust = payment(alice, funded, 10_000_000n, bob.address, 500_000n);
    expect((await submit(node, dust.bytes)).json.message).toMatch(/BabbageOutputTooSmallUTxO/);
    const mainnet = payment(alice, funded, 10_000_000n, wallet(1).address, 2_000_000n);
    expect((await submit(node, mainnet.bytes)).json.message).toMatch(/WrongNetwork/);
    expect(node.mempool()).toEqual([]);
  });

  it('refuses a transaction whose ttl slot is reached (OutsideValidityIntervalUTxO), drops expired ones from the mempool', async () => {
    const slot = node.tip().slot;
    const late = payment(alice, funded, 10_000_000n, bob.address, 2_000_000n, { ttl: slot });
    expect((await submit(node, late.bytes)).json.message).toMatch(/OutsideValidityIntervalUTxO/);
    const ok = payment(alice, funded, 10_000_000n, bob.address, 2_000_000n, { ttl: slot + 5 });
    expect((await submit(node, ok.bytes)).status).toBe(200);
    node.advance(5);
    expect(node.mempool()).toEqual([]);
    node.produceBlock();
    expect((await call(node, `/txs/${ok.hash}`)).status).toBe(404);
    expect(node.balanceOf(alice.address)).toBe(10_000_000n);
  });

  it('takes CBOR only, refuses garbage, and checks the project id when it has one', async () => {
    const t = payment(alice, funded, 10_000_000n, bob.address, 2_000_000n);
    const wrongType = await call(node, '/tx/submit', {
      method: 'POST',
      body: t.bytes,
      type: 'application/json',
    });
    expect(wrongType.status).toBe(415);
    expect((await submit(node, Buffer.from('not cbor'))).json.message).toMatch(/DeserialiseFailure/);
    const guarded = await startCardanoResponder({ projectId: 'preprodABC' });
    try {
      expect(await call(guarded, '/blocks/latest')).toMatchObject({
        status: 403,
        json: { status_code: 403 },
      });
      expect((await call(guarded, '/blocks/latest', { projectId: 'preprodXYZ' })).status).toBe(403);
      expect((await call(guarded, '/blocks/latest', { projectId: 'preprodABC' })).status).toBe(200);
    } finally {
      await guarded.close();
    }
  });

  it('injects failures: 503 answers, then a node that stops answering', async () => {
    node.failNext(2, 503);
    expect((await call(node, '/blocks/latest')).status).toBe(503);
    expect((await call(node, '/blocks/latest')).json).toMatchObject({ status_code: 503 });
    expect((await call(node, '/blocks/latest')).status).toBe(200);
    node.hang(true);
    await expect(
      fetch(`${node.url}/blocks/latest`, { signal: AbortSignal.timeout(200) }).then((r) => r.status),
    ).rejects.toBeDefined();
    node.hang(false);
    expect((await call(node, '/blocks/latest')).status).toBe(200);
  });

  it('uses mainnet parameters unless told otherwise', () => {
    expect(node.parameters).toEqual(MAINNET_PARAMETERS);
  });
});
