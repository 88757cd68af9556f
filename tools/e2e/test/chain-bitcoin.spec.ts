import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { type BitcoinResponder, startBitcoinResponder } from '@custos/chain-responders/bitcoin';
import type * as B from 'bitcoinjs-lib' with { 'resolution-mode': 'import' };
import { Signature, SigningKey } from 'ethers';
import {
  type ChainAgent,
  type Reply,
  chainAgent,
  getTransaction,
  privateKeyOf,
  registerChain,
  scanCorpus,
  signOnly,
  submitTransaction,
  transactionCount,
  waitForStatus,
} from '../src/chains';
import { api } from '../src/api';
import { type Mesh, sharedMesh } from '../src/mesh';

// Issue 18: Bitcoin transfers through the Intents API of the real mesh, against a local Esplora
// node (@custos/chain-responders/bitcoin, regtest) that decodes every transaction with
// bitcoinjs-lib and checks its inputs, amounts, dust, fee and every signature before taking it.

// bitcoinjs-lib 7 is an ES module package with a CommonJS build: that build, typed by the package.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const bitcoin = require('bitcoinjs-lib') as typeof B;
const REGTEST = bitcoin.networks.regtest;
type Body = Record<string, unknown>;
type Tx = InstanceType<typeof bitcoin.Transaction>;

/** A 400 problem naming `field` (and `type` when given). */
function expectRefusal(r: Reply, field: string, type?: string): void {
  if (r.status !== 400) throw new Error(`expected 400 naming ${field}, got ${r.status}: ${r.text}`);
  expect(r.body).toMatchObject({ status: 400, field, ...(type ? { type } : {}) });
}

/** A fresh regtest P2WPKH address (not the agent's). */
function otherAddress(): string {
  const pub = SigningKey.computePublicKey(`0x${randomBytes(32).toString('hex')}`, true);
  return bitcoin.payments.p2wpkh({ pubkey: Buffer.from(pub.slice(2), 'hex'), network: REGTEST }).address!;
}

/**
 * The signed transaction checked with bitcoinjs-lib and ethers alone: every input a P2WPKH spend
 * by `pub` whose BIP-143 sighash (over the spent UTXO's value) the signature covers.
 */
function verifiedTx(hex: string, pub: string, spent: (txid: string, vout: number) => bigint): Tx {
  const tx = bitcoin.Transaction.fromHex(hex);
  const pubkey = Buffer.from(pub, 'hex');
  const hash = bitcoin.payments.p2wpkh({ pubkey }).hash!;
  const scriptCode = bitcoin.payments.p2pkh({ hash }).output!;
  expect(tx.ins.length).toBeGreaterThan(0);
  tx.ins.forEach((input, i) => {
    expect(Buffer.from(input.witness[1]!).toString('hex')).toBe(pub);
    const prev = Buffer.from(input.hash).reverse().toString('hex');
    const { signature, hashType } = bitcoin.script.signature.decode(input.witness[0]!);
    const digest = tx.hashForWitnessV0(i, scriptCode, spent(prev, input.index), hashType);
    const sig = {
      r: `0x${Buffer.from(signature.subarray(0, 32)).toString('hex')}`,
      s: `0x${Buffer.from(signature.subarray(32)).toString('hex')}`,
    };
    const recovered = ([0, 1] as const).map((yParity) =>
      SigningKey.recoverPublicKey(
        `0x${Buffer.from(digest).toString('hex')}`,
        Signature.from({ ...sig, yParity }),
      ),
    );
    expect(recovered).toContain(SigningKey.computePublicKey(`0x${pub}`, false));
  });
  return tx;
}

function outputsOf(tx: Tx): [string, bigint][] {
  return tx.outs.map((o) => [bitcoin.address.fromOutputScript(o.script, REGTEST), o.value]);
}

/** Base58Check (for the WIF forms of the key in the canary scan). */
function base58check(payload: Buffer): string {
  const sum = createHash('sha256').update(createHash('sha256').update(payload).digest()).digest();
  const bytes = Buffer.concat([payload, sum.subarray(0, 4)]);
  const alphabet = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
  let n = BigInt(`0x${bytes.toString('hex')}`);
  let out = '';
  while (n > 0n) {
    out = alphabet[Number(n % 58n)]! + out;
    n /= 58n;
  }
  for (const b of bytes) {
    if (b !== 0) break;
    out = `1${out}`;
  }
  return out;
}

describe('Bitcoin transfers (shared mesh, local Esplora node on regtest)', () => {
  let mesh: Mesh;
  let node: BitcoinResponder;
  let chain: string;
  let agent: ChainAgent;
  let address: string; // bc1q… as stored
  let rtAddress: string; // bcrt1q… on the chain
  let publicKey: string;
  const funding = new Map<string, bigint>(); // txid:vout → value, every UTXO the agent was given
  const bob = otherAddress();
  const seen: string[] = [];
  const valueOf = (txid: string, vout: number): bigint => {
    const fromNode = node.accepted.find((t) => t.txid === txid)?.outputs[vout]?.value;
    const v = funding.get(`${txid}:${vout}`) ?? fromNode;
    if (v === undefined) throw new Error(`unknown UTXO ${txid}:${vout}`);
    return v;
  };

  const submit = async (body: Body, idem?: string) => {
    const r = await submitTransaction(mesh, agent, { chain, ...body }, idem);
    seen.push(r.text);
    return r;
  };
  const settled = async (id: string) => {
    const done = await waitForStatus(mesh, agent, id, ['confirmed', 'failed'], () => {
      node.mine();
    });
    seen.push(JSON.stringify(done));
    return done;
  };

  beforeAll(async () => {
    mesh = await sharedMesh();
    node = await startBitcoinResponder({ network: 'regtest' });
    node.feeEstimates = { '1': 12.5, '3': 6, '6': 2.4, '144': 1 };
    chain = await registerChain(mesh, { family: 'bitcoin', network: 'regtest', rpcUrl: node.url });
    agent = await chainAgent(mesh, chain);
    seen.push(...agent.seen);
    publicKey = String(agent.key['public_key']);
    // The creation answers the address on the chain's network; the key row keeps the mainnet form.
    rtAddress = String(agent.key['address']);
    address = bitcoin.payments.p2wpkh({ pubkey: Buffer.from(publicKey, 'hex') }).address!;
    for (const sats of [1_000_000n, 800_000n, 600_000n, 400_000n]) {
      const f = node.fund(rtAddress, sats);
      funding.set(`${f.txid}:${f.vout}`, sats);
    }
  });
  afterAll(async () => {
    await node?.close();
  });

  it('makes a secp256k1 key: created on regtest it answers its bcrt1 address; the listing keeps the mainnet P2WPKH form', async () => {
    expect(agent.key['curve']).toBe('secp256k1');
    expect(publicKey).toMatch(/^0[23][0-9a-f]{64}$/);
    expect(rtAddress).toMatch(/^bcrt1q/);
    expect(rtAddress).toBe(
      bitcoin.payments.p2wpkh({ pubkey: Buffer.from(publicKey, 'hex'), network: REGTEST }).address,
    );
    const listed = await api(mesh, 'GET', `/v1/agents/${agent.id}/signing-keys`, {
      token: agent.owner.token,
    });
    seen.push(JSON.stringify(listed.body));
    expect((listed.body['keys'] as Array<{ address: string }>)[0]!.address).toBe(address);
    expect(address).toMatch(/^bc1q/);
    const script = bitcoin.address.toOutputScript(address, bitcoin.networks.bitcoin);
    expect(Buffer.from(script)).toEqual(
      Buffer.from(bitcoin.payments.p2wpkh({ pubkey: Buffer.from(publicKey, 'hex') }).output!),
    );
    expect(() => bitcoin.address.toOutputScript(address, REGTEST)).toThrow();
  });

  it('submits a transfer the node verifies, with change back, and follows it to confirmed', async () => {
    const r = await submit({ to: bob, value: '0.005' });
    if (r.status !== 201) throw new Error(`submit: ${r.status} ${r.text}`);
    // The largest UTXO (1,000,000 sat), 141 vB at 2.4 sat/vB: ceil(338.4) = 339 sat.
    expect(r.body).toMatchObject({
      family: 'bitcoin',
      from: rtAddress,
      to: bob,
      value_wei: '500000',
      fee: '339',
      status: 'broadcast',
      nonce: null,
    });
    expect(r.body['details']).toMatchObject({
      fee_rate: '2.4',
      fee_rate_source: 'fee-estimates',
      vsize: '141',
      inputs: '1',
      change: String(1_000_000 - 500_000 - 339),
    });
    const tx = verifiedTx(String(r.body['signed_tx']), publicKey, valueOf);
    expect(r.body['tx_hash']).toBe(tx.getId());
    expect(outputsOf(tx)).toEqual([
      [bob, 500_000n],
      [rtAddress, 499_661n],
    ]);
    // The node took exactly these bytes.
    expect(node.accepted.find((t) => t.txid === tx.getId())).toMatchObject({
      hex: r.body['signed_tx'],
      fee: 339n,
    });

    const done = await settled(String(r.body['id']));
    expect(done['status']).toBe('confirmed');
    expect(node.utxos(bob)).toEqual([{ txid: tx.getId(), vout: 0, value: 500_000n, confirmed: true }]);
  });

  it('signs only: the transaction parses and its signatures verify, and nothing reaches the node', async () => {
    const before = node.accepted.length;
    const posts = node.requests.filter((x) => x.startsWith('POST')).length;
    const r = await signOnly(mesh, agent, { chain, to: bob, value: '25000', fee_rate_sat_per_vbyte: 5 });
    seen.push(r.text);
    if (r.status !== 200 && r.status !== 201) {
      const why = (mesh.output.get('signer') ?? []).filter((l) => /refused|error/i.test(l)).slice(-3);
      throw new Error(`sign: ${r.status} ${r.text}\n${why.join('\n')}`);
    }
    expect(r.body).toMatchObject({ status: 'sign_only', chain, from: rtAddress });
    const tx = verifiedTx(String(r.body['signed_tx']), publicKey, valueOf);
    expect(r.body['tx_hash']).toBe(tx.getId());
    expect(outputsOf(tx)[0]).toEqual([bob, 25_000n]);
    expect(node.accepted.length).toBe(before);
    expect(node.requests.filter((x) => x.startsWith('POST')).length).toBe(posts);
  });

  it('refuses insufficient funds, malformed and wrong-network addresses, dust and fields Bitcoin has not, recording nothing', async () => {
    const before = await transactionCount(mesh, agent.id);
    const accepted = node.accepted.length;
    expectRefusal(await submit({ to: bob, value: '21.0' }), 'value', 'insufficient_funds');
    expectRefusal(
      await submit({ to: `${bob.slice(0, -1)}${bob.endsWith('q') ? 'p' : 'q'}`, value: '10000' }),
      'to',
    );
    expectRefusal(await submit({ to: '0x52908400098527886E0F7030069857D2E4169EE7', value: '10000' }), 'to');
    const mainnet = bitcoin.payments.p2wpkh({
      pubkey: Buffer.from(
        SigningKey.computePublicKey(`0x${randomBytes(32).toString('hex')}`, true).slice(2),
        'hex',
      ),
    }).address!;
    expectRefusal(await submit({ to: mainnet, value: '10000' }), 'to');
    expectRefusal(await submit({ to: bob, value: '293' }), 'value');
    expectRefusal(await submit({ to: bob, value: '10000', memo: 'hello' }), 'memo');
    expectRefusal(
      await submit({ to: bob, value: '10000', fee_rate_sat_per_vbyte: 20_000 }),
      'fee_rate_sat_per_vbyte',
    );
    expectRefusal(await submit({ to: bob, value: '10000', token_mint: 'x' }), 'token_mint');
    expect(await transactionCount(mesh, agent.id)).toBe(before);
    expect(node.accepted.length).toBe(accepted);
  });

  it('Idempotency-Key: a repeat returns the same transaction, another body with the key is refused', async () => {
    const key = `btc-${randomUUID()}`;
    const body = { to: bob, value: '150000', fee_rate_sat_per_vbyte: 2 };
    const first = await submit(body, key);
    if (first.status !== 201) throw new Error(`submit: ${first.status} ${first.text}`);
    const again = await submit(body, key);
    expect(again.status).toBe(200);
    expect(again.body['id']).toBe(first.body['id']);
    expect(again.body['tx_hash']).toBe(first.body['tx_hash']);
    const other = await submit({ ...body, value: '160000' }, key);
    expect(other.status).toBe(422);
    expect(other.body['type']).toBe('idempotency_key_reused');
    expect(node.accepted.filter((t) => t.txid === first.body['tx_hash'])).toHaveLength(1);
    const done = await settled(String(first.body['id']));
    expect(done['status']).toBe('confirmed');
    const got = await getTransaction(mesh, agent, String(first.body['id']));
    seen.push(got.text);
    expect(got.body['signed_tx']).toBe(first.body['signed_tx']);
  });

  it("a transaction the node refuses at broadcast ends failed with bitcoind's words, its input free again", async () => {
    const refusal = 'sendrawtransaction RPC error: {"code":-26,"message":"min relay fee not met, 141 < 282"}';
    node.failNext(1, 400, refusal, /^POST \/tx$/);
    const r = await submit({ to: bob, value: '70000', fee_rate_sat_per_vbyte: 1 });
    if (r.status !== 201) throw new Error(`submit: ${r.status} ${r.text}`);
    expect(r.body['status']).toBe('failed');
    expect(node.accepted.find((t) => t.txid === r.body['tx_hash'])).toBeUndefined();
    const got = await getTransaction(mesh, agent, String(r.body['id']));
    seen.push(got.text);
    expect(got.body['status']).toBe('failed');
    expect(JSON.stringify(got.body)).toMatch(/min relay fee not met/);
    // Its input is not held any more: the same transfer again spends it and goes through.
    // A failed transaction's answer carries no signed bytes. Its input is not held any more: the
    // same transfer again picks the same (largest) UTXO, so the same change, and goes through.
    expect(r.body['details']).toMatchObject({ inputs: '1' });
    const again = await submit({ to: bob, value: '70000', fee_rate_sat_per_vbyte: 1 });
    if (again.status !== 201) throw new Error(`submit: ${again.status} ${again.text}`);
    expect(again.body['status']).toBe('broadcast');
    expect(again.body['fee']).toBe(r.body['fee']);
    expect((again.body['details'] as Body)['change']).toBe((r.body['details'] as Body)['change']);
    const tx = verifiedTx(String(again.body['signed_tx']), publicKey, valueOf);
    expect(node.accepted.find((t) => t.txid === tx.getId())).toBeDefined();
    expect((await settled(String(again.body['id'])))['status']).toBe('confirmed');
  });

  it('a transaction whose input another spend took (evicted, then double-spent) ends failed as expired', async () => {
    const r = await submit({ to: bob, value: '40000', fee_rate_sat_per_vbyte: 1 });
    if (r.status !== 201) throw new Error(`submit: ${r.status} ${r.text}`);
    expect(r.body['status']).toBe('broadcast');
    const mine = bitcoin.Transaction.fromHex(String(r.body['signed_tx']));
    // A rival spend of the same input, signed with the agent's own key outside Custos.
    const priv = await privateKeyOf(mesh, agent.id);
    const input = mine.ins[0]!;
    const prev = Buffer.from(input.hash).reverse().toString('hex');
    const own = bitcoin.payments.p2wpkh({ pubkey: Buffer.from(publicKey, 'hex'), network: REGTEST });
    const psbt = new bitcoin.Psbt({ network: REGTEST });
    const value = valueOf(prev, input.index);
    psbt.addInput({ hash: prev, index: input.index, witnessUtxo: { script: own.output!, value } });
    psbt.addOutput({ address: otherAddress(), value: value - 1_000n });
    psbt.signAllInputs({
      publicKey: Buffer.from(publicKey, 'hex'),
      sign: (hash: Uint8Array) => {
        const sig = new SigningKey(priv).sign(hash);
        return Buffer.from(`${sig.r.slice(2)}${sig.s.slice(2)}`, 'hex');
      },
    });
    psbt.finalizeAllInputs();
    const rival = psbt.extractTransaction(true);
    // Dropped from the node's mempool and replaced in the same instant (no watcher look between).
    node.evict(mine.getId());
    expect(node.submitRaw(rival.toHex())).toEqual({ status: 200, text: rival.getId() });
    const done = await waitForStatus(mesh, agent, String(r.body['id']), ['failed', 'confirmed'], () => {
      node.mine();
    });
    seen.push(JSON.stringify(done));
    expect(done['status']).toBe('failed');
    expect(JSON.stringify(done)).toMatch(new RegExp(`expired.*spent by ${rival.getId()}`));
    expect(node.mempool()).not.toContain(mine.getId());
  });

  it("the agent's private key appears in no response, log line, event or audit record (canary scan)", async () => {
    const priv = await privateKeyOf(mesh, agent.id);
    expect(priv).toHaveLength(32);
    // The key the mesh holds is the key that signed: it derives the agent's public key.
    expect(SigningKey.computePublicKey(priv, true)).toBe(`0x${publicKey}`);
    const corpus = await scanCorpus(mesh, agent.owner.token, seen);
    expect(corpus).toContain(address.toLowerCase());
    expect(corpus).toContain(rtAddress.toLowerCase());
    for (const secret of [
      priv.toString('hex'),
      priv.toString('base64'),
      base58check(Buffer.concat([Buffer.from([0x80]), priv, Buffer.from([1])])), // mainnet WIF
      base58check(Buffer.concat([Buffer.from([0xef]), priv, Buffer.from([1])])), // testnet/regtest WIF
      base58check(Buffer.concat([Buffer.from([0x80]), priv])), // uncompressed WIF
      Array.from(priv).join(','),
    ]) {
      expect(corpus).not.toContain(secret.toLowerCase());
    }
  });
});
