import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { TronResponder } from '@custos/chain-responders/tron';
import { Signature, SigningKey, computeAddress } from 'ethers';
import { TronWeb, utils } from 'tronweb';
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
import { type Mesh, sharedMesh } from '../src/mesh';

// Issue 18: Tron transfers through the public API of the shared mesh, against a local java-tron
// HTTP responder (tools/chain-responders/src/tron.ts) that verifies every broadcast with tronweb.

type Body = Record<string, unknown>;
const TRX = 1_000_000n;

/** A fresh random Tron address (base58 `T…`). */
const randomAddress = (): string => TronWeb.address.fromPrivateKey(randomBytes(32).toString('hex')) as string;

interface SignedTronTx {
  txID: string;
  raw_data: Record<string, unknown>;
  raw_data_hex: string;
  signature: string[];
}

/** Checks a signed transaction with the chain library: id, encoding, and the signer's public key. */
function verifySignedTx(signedTx: string, publicKey: string, address: string): SignedTronTx {
  const tx = JSON.parse(signedTx) as SignedTronTx;
  expect(createHash('sha256').update(Buffer.from(tx.raw_data_hex, 'hex')).digest('hex')).toBe(tx.txID);
  const pb = utils.transaction.txJsonToPb({ raw_data: tx.raw_data, visible: false });
  expect(utils.transaction.txPbToRawDataHex(pb).toLowerCase()).toBe(tx.raw_data_hex);
  expect(tx.signature).toHaveLength(1);
  const sig = tx.signature[0]!;
  const recovered = SigningKey.recoverPublicKey(
    `0x${tx.txID}`,
    Signature.from({
      r: `0x${sig.slice(0, 64)}`,
      s: `0x${sig.slice(64, 128)}`,
      v: parseInt(sig.slice(128), 16),
    }),
  );
  expect(recovered).toBe(publicKey);
  expect(TronWeb.address.fromHex(utils.crypto.ecRecover(tx.txID, sig))).toBe(address);
  return tx;
}

/** A 400 problem naming `field` (and of `type` when given). */
function expectRefused(r: Reply, field: string, type?: string): void {
  if (r.status !== 400) throw new Error(`expected 400 naming ${field}, got ${r.status}: ${r.text}`);
  expect(r.body).toMatchObject({ status: 400, field, ...(type ? { type } : {}) });
}

describe('tron chain through the API (shared mesh)', () => {
  let mesh: Mesh;
  let node: TronResponder;
  let chain: string;
  let agent: ChainAgent;
  let address: string;
  let publicKey: string;
  // Every API answer of this spec, for the canary scan.
  const seen: string[] = [];
  const send = async (body: Body, idem?: string): Promise<Reply> => {
    const r = await submitTransaction(mesh, agent, { chain, ...body }, idem);
    seen.push(r.text);
    return r;
  };

  beforeAll(async () => {
    mesh = await sharedMesh();
    node = await TronResponder.start();
    node.produceBlock();
    chain = await registerChain(mesh, { family: 'tron', network: 'nile', rpcUrl: node.url });
    agent = await chainAgent(mesh, chain);
    seen.push(...agent.seen);
    address = agent.key['address'] as string;
    publicKey = agent.key['public_key'] as string;
    node.fund(address, 500n * TRX);
  });
  afterAll(async () => {
    await node?.close();
  });

  it('makes a secp256k1 key whose T… address the chain library accepts and derives from its public key', async () => {
    expect(address).toMatch(/^T[1-9A-HJ-NP-Za-km-z]{33}$/);
    expect(TronWeb.isAddress(address)).toBe(true);
    expect(publicKey).toMatch(/^0x04[0-9a-f]{128}$/);
    expect(TronWeb.address.fromHex(`41${computeAddress(publicKey).slice(2)}`)).toBe(address);
    const pk = await privateKeyOf(mesh, agent.id);
    expect(TronWeb.address.fromPrivateKey(pk.toString('hex'))).toBe(address);
  });

  it('submits a TRX transfer with a memo that the node verifies and the watcher follows to confirmed', async () => {
    const to = randomAddress();
    const r = await send({ to, value: '1.5', memo: 'e2e tron' });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ family: 'tron', from: address, to, value_wei: '1500000' });
    const txId = r.body['id'] as string;
    const txHash = r.body['tx_hash'] as string;
    verifySignedTx(r.body['signed_tx'] as string, publicKey, address);
    // The responder verified exactly these bytes, signed by the agent's key.
    const v = node.verified.find((x) => x.txID === txHash);
    expect(v).toMatchObject({
      type: 'TransferContract',
      from: address,
      to,
      amount: 1_500_000n,
      memo: 'e2e tron',
    });
    expect(v!.signer).toBe(publicKey);
    const done = await waitForStatus(mesh, agent, txId, ['confirmed', 'failed'], () => {
      node.produceBlock();
    });
    seen.push(JSON.stringify(done));
    expect(done['status']).toBe('confirmed');
    expect(node.balanceOf(to)).toBe(1_500_000n);
    const info = node.infoOf(txHash);
    expect(BigInt(done['fee'] as string)).toBeGreaterThanOrEqual(BigInt(info['fee'] as number));
  });

  it('submits a TRC-20 transfer (token_mint, default fee limit) to confirmed', async () => {
    const token = node.deployToken({ symbol: 'USDT', decimals: 6 });
    node.mintToken(token, address, 10_000_000n);
    const to = randomAddress();
    const r = await send({ to, value: '2.5', token_mint: token });
    expect(r.status).toBe(201);
    expect(r.body['value_wei']).toBe('2500000');
    expect(r.body['details']).toMatchObject({ token_mint: token, fee_limit_sun: '100000000' });
    const tx = verifySignedTx(r.body['signed_tx'] as string, publicKey, address);
    const d = utils.deserializeTx.deserializeTransaction('TriggerSmartContract', tx.raw_data_hex);
    expect(String(d.contract[0].parameter.value.contract_address).toLowerCase()).toBe(
      TronWeb.address.toHex(token).toLowerCase(),
    );
    const done = await waitForStatus(mesh, agent, r.body['id'] as string, ['confirmed', 'failed'], () => {
      node.produceBlock();
    });
    seen.push(JSON.stringify(done));
    expect(done['status']).toBe('confirmed');
    expect(node.tokenBalance(token, to)).toBe(2_500_000n);
    expect(node.tokenBalance(token, address)).toBe(7_500_000n);
  });

  it('refuses a TRC-20 transfer the key cannot pay with its transfers in flight (400, nothing recorded), and follows one the contract reverts on inclusion to failed', async () => {
    const token = node.deployToken({ symbol: 'REV', decimals: 6 });
    node.mintToken(token, address, 1_000_000n);
    const a = await send({ to: randomAddress(), value: '1000000', token_mint: token });
    expect(a.status).toBe(201);
    // The same token balance again while `a` is in flight: refused before anything is recorded
    // (parallel or quick requests cannot overspend and burn energy on a revert).
    const before = await transactionCount(mesh, agent.id);
    const b = await send({ to: randomAddress(), value: '1000000', token_mint: token });
    expectRefused(b, 'value', 'insufficient_funds');
    expect(await transactionCount(mesh, agent.id)).toBe(before);
    // The token's owner blacklists the sender before `a` is included: REVERT on chain, followed to failed.
    node.blacklist(token, address);
    const da = await waitForStatus(mesh, agent, a.body['id'] as string, ['confirmed', 'failed'], () => {
      node.produceBlock();
    });
    seen.push(JSON.stringify(da));
    expect(da['status']).toBe('failed');
    expect(node.infoOf(a.body['tx_hash'] as string)).toMatchObject({ receipt: { result: 'REVERT' } });
    expect(node.tokenBalance(token, address)).toBe(1_000_000n);
  });

  it('signs without broadcasting: the signed transaction parses and its signature is the key’s', async () => {
    const before = node.verified.length;
    const to = randomAddress();
    const r = await signOnly(mesh, agent, { chain, to, value: '1000' });
    seen.push(r.text);
    if (r.status !== 200 && r.status !== 201) throw new Error(`sign-only: ${r.status} ${r.text}`);
    expect(r.body).toMatchObject({ intent_type: 'transaction', status: 'sign_only', from: address });
    const tx = verifySignedTx(r.body['signed_tx'] as string, publicKey, address);
    expect(r.body['tx_hash']).toBe(tx.txID);
    const d = utils.deserializeTx.deserializeTransaction('TransferContract', tx.raw_data_hex);
    expect(d.contract[0].parameter.value.amount).toBe(1000);
    expect(String(d.contract[0].parameter.value.to_address).toLowerCase()).toBe(
      TronWeb.address.toHex(to).toLowerCase(),
    );
    expect(node.verified.length).toBe(before);
  });

  it('refuses insufficient funds and malformed addresses with 400 naming the field, recording nothing', async () => {
    const before = await transactionCount(mesh, agent.id);
    expectRefused(await send({ to: randomAddress(), value: '100000.0' }), 'value', 'insufficient_funds');
    expectRefused(await send({ to: 'TNotAnAddressAtAll1111111111111111', value: '1' }), 'to');
    expectRefused(await send({ to: TronWeb.address.toHex(randomAddress()), value: '1' }), 'to');
    expectRefused(await send({ to: '0x92f2d69f1e8f6b8d2f0c5bb1d5b0a42bd9b4c8a3', value: '1' }), 'to');
    expectRefused(await send({ to: randomAddress(), value: '1', fee_limit_sun: 1000 }), 'fee_limit_sun');
    expectRefused(await send({ to: randomAddress(), value: '1', destination_tag: 5 }), 'destination_tag');
    const token = node.deployToken({ symbol: 'LOW', decimals: 6 });
    node.mintToken(token, address, 5n);
    expectRefused(
      await send({ to: randomAddress(), value: '6', token_mint: token }),
      'value',
      'insufficient_funds',
    );
    expect(await transactionCount(mesh, agent.id)).toBe(before);
  });

  it('replays an Idempotency-Key with the same transaction and refuses another body under it', async () => {
    const key = `k-${randomUUID()}`;
    const body = { to: randomAddress(), value: '7' };
    const first = await send(body, key);
    expect(first.status).toBe(201);
    const again = await send(body, key);
    expect(again.status).toBe(200);
    expect(again.body['id']).toBe(first.body['id']);
    expect(again.body['tx_hash']).toBe(first.body['tx_hash']);
    const other = await send({ ...body, value: '8' }, key);
    expect(other.status).toBe(422);
    expect(other.body).toMatchObject({ type: 'idempotency_key_reused' });
    expect(node.verified.filter((v) => v.txID === first.body['tx_hash'])).toHaveLength(1);
    const done = await waitForStatus(mesh, agent, first.body['id'] as string, ['confirmed'], () => {
      node.produceBlock();
    });
    seen.push(JSON.stringify(done));
    const got = await getTransaction(mesh, agent, first.body['id'] as string);
    seen.push(got.text);
    expect(got.body['status']).toBe('confirmed');
  });

  it('canary: the private key appears in no answer, audit record, event or log line', async () => {
    const pk = await privateKeyOf(mesh, agent.id);
    const corpus = await scanCorpus(mesh, agent.owner.token, seen);
    expect(corpus).toContain(address.toLowerCase());
    const hex = pk.toString('hex');
    for (const secret of [
      hex,
      pk.toString('base64'),
      pk.toString('base64url'),
      utils.base58.encode58(Array.from(pk)),
    ]) {
      expect(corpus).not.toContain(secret.toLowerCase());
    }
    // And not split by a 0x prefix.
    expect(corpus).not.toContain(`0x${hex}`);
  });
});
