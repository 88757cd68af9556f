import { randomBytes, randomUUID } from 'node:crypto';
import * as CSL from '@emurgo/cardano-serialization-lib-nodejs';
import { type CardanoResponder, startCardanoResponder } from '@custos/chain-responders/cardano';
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

// Issue 18, Cardano: ADA payments through the public API, the mesh's signer talking Blockfrost to a
// local responder (@custos/chain-responders/cardano) that verifies every submitted transaction with
// cardano-serialization-lib. The chain is a preprod one (addresses addr_test1…).

type Body = Record<string, unknown>;

/** A preprod payment key's enterprise address, made here (not by signer). */
function testnetAddress(): string {
  const sk = CSL.PrivateKey.from_normal_bytes(randomBytes(32));
  return CSL.EnterpriseAddress.new(0, CSL.Credential.from_keyhash(sk.to_public().hash()))
    .to_address()
    .to_bech32();
}

/** A 400 problem naming `field`, as the gateway answers it. */
function expect400(r: Reply, field: string): void {
  if (r.status !== 400) throw new Error(`expected 400 naming ${field}, got ${r.status}: ${r.text}`);
  expect(r.body).toMatchObject({ status: 400, field, detail: expect.any(String) });
}

/** The signed transaction decoded and checked with the library: hash, one witness by `publicKey`. */
function verifySigned(signedTx: string, txHash: string, publicKey: string): CSL.FixedTransaction {
  const tx = CSL.FixedTransaction.from_hex(signedTx.replace(/^0x/, ''));
  const hash = tx.transaction_hash();
  expect(hash.to_hex()).toBe(txHash.replace(/^0x/, ''));
  const vkeys = tx.witness_set().vkeys()!;
  expect(vkeys.len()).toBe(1);
  expect(vkeys.get(0).vkey().public_key().to_hex()).toBe(publicKey);
  expect(CSL.PublicKey.from_hex(publicKey).verify(hash.to_bytes(), vkeys.get(0).signature())).toBe(true);
  return tx;
}

describe('Cardano transfers through the Intents API (Blockfrost responder)', () => {
  let mesh: Mesh;
  let node: CardanoResponder;
  let chain: string;
  let agent: ChainAgent;
  /** The key's preprod address (the key row stores the mainnet `addr1…` form). */
  let from: string;
  let publicKey: string;
  const seen: string[] = [];
  const project = `preprod${randomBytes(8).toString('hex')}`;

  const remember = (r: Reply): Reply => {
    seen.push(r.text);
    return r;
  };

  beforeAll(async () => {
    mesh = await sharedMesh();
    node = await startCardanoResponder({ networkId: 0, projectId: project });
    // Blockfrost's project id as the URL's user: signer must send it as the `project_id` header.
    const url = new URL(node.url);
    url.username = project;
    chain = await registerChain(mesh, { family: 'cardano', network: 'preprod', rpcUrl: url.toString() });
    agent = await chainAgent(mesh, chain);
    seen.push(...agent.seen);
    publicKey = String(agent.key['public_key']);
    // The creation answers the address on the chain's network (preprod); the key row keeps mainnet's.
    from = String(agent.key['address']);
    for (let i = 0; i < 6; i++) node.fund(from, 20_000_000n);
  });

  afterAll(async () => {
    await node?.close();
    await mesh?.stop();
  });

  it('makes an ed25519 payment key: created on preprod it answers its addr_test address; the listing keeps the mainnet enterprise form', async () => {
    expect(agent.key['curve']).toBe('ed25519');
    expect(publicKey).toMatch(/^[0-9a-f]{64}$/);
    const keyHash = CSL.PublicKey.from_hex(publicKey).hash().to_hex();
    const onPreprod = CSL.Address.from_bech32(from);
    expect(from).toMatch(/^addr_test1/);
    expect(onPreprod.kind()).toBe(CSL.AddressKind.Enterprise);
    expect(onPreprod.network_id()).toBe(0);
    expect(onPreprod.payment_cred()!.to_keyhash()!.to_hex()).toBe(keyHash);
    const listed = await api(mesh, 'GET', `/v1/agents/${agent.id}/signing-keys`, {
      token: agent.owner.token,
    });
    seen.push(JSON.stringify(listed.body));
    const stored = (listed.body['keys'] as Array<{ address: string }>)[0]!.address;
    const a = CSL.Address.from_bech32(stored);
    expect(a.to_bech32()).toBe(stored);
    expect(a.kind()).toBe(CSL.AddressKind.Enterprise);
    expect(a.network_id()).toBe(1);
    expect(a.payment_cred()!.to_keyhash()!.to_hex()).toBe(keyHash);
  });

  it('pays ADA with a CIP-20 memo: verified by the node, followed to confirmed', async () => {
    const to = testnetAddress();
    const r = remember(
      await submitTransaction(mesh, agent, { chain, to, value: '2.5', memo: 'e2e cardano payment' }),
    );
    if (r.status !== 201) throw new Error(`submit: ${r.status} ${r.text}`);
    expect(r.body).toMatchObject({ family: 'cardano', from, to, value_wei: '2500000', status: 'broadcast' });
    const txHash = String(r.body['tx_hash']);
    // The node verified and holds exactly these bytes, signed by the agent's key.
    const accepted = node.submitted.get(txHash.replace(/^0x/, ''))!;
    expect(accepted).toBeDefined();
    expect(accepted.signers).toEqual([publicKey]);
    expect(accepted.memo).toEqual(['e2e cardano payment']);
    expect(accepted.outputs[0]).toMatchObject({ address: to, lovelace: 2_500_000n });
    expect(accepted.inputs.every((i) => i.address === from)).toBe(true);
    const tx = verifySigned(String(r.body['signed_tx']), txHash, publicKey);
    expect(tx.body().fee().to_str()).toBe(String(r.body['fee']));
    // Signer reached Blockfrost with the project id header, never Basic auth.
    const submits = node.requests.filter((q) => q.path === '/tx/submit');
    expect(submits.length).toBeGreaterThan(0);
    for (const q of node.requests) {
      expect(q.headers['project_id']).toBe(project);
      expect(q.headers.authorization).toBeUndefined();
    }

    const done = await waitForStatus(mesh, agent, String(r.body['id']), ['confirmed'], () => {
      if (node.mempool().length > 0) node.produceBlock();
    });
    seen.push(JSON.stringify(done));
    expect(done).toMatchObject({ status: 'confirmed', tx_hash: r.body['tx_hash'] });
    expect(node.balanceOf(to)).toBe(2_500_000n);
  });

  it('signs only (sign intent): the CBOR parses, its witness verifies, nothing is broadcast', async () => {
    const to = testnetAddress();
    const before = node.requests.filter((q) => q.path === '/tx/submit').length;
    const r = remember(await signOnly(mesh, agent, { chain, to, value: '1500000' }));
    if (r.status !== 200 && r.status !== 201) throw new Error(`sign: ${r.status} ${r.text}`);
    expect(r.body).toMatchObject({ intent_type: 'transaction', status: 'sign_only', from });
    const tx = verifySigned(String(r.body['signed_tx']), String(r.body['tx_hash']), publicKey);
    const out = tx.body().outputs().get(0);
    expect(out.address().to_bech32()).toBe(to);
    expect(out.amount().coin().to_str()).toBe('1500000');
    expect(tx.body().ttl_bignum()).toBeDefined();
    expect(node.requests.filter((q) => q.path === '/tx/submit').length).toBe(before);
    expect(node.submitted.has(String(r.body['tx_hash']).replace(/^0x/, ''))).toBe(false);
  });

  it('refuses insufficient funds and malformed or wrong-network addresses (400 naming the field), recording nothing', async () => {
    const count = await transactionCount(mesh, agent.id);
    const poor = remember(
      await submitTransaction(mesh, agent, { chain, to: testnetAddress(), value: '5000.5' }),
    );
    expect400(poor, 'value');
    expect(JSON.stringify(poor.body)).toContain('insufficient_funds');
    const good = testnetAddress();
    const typo = `${good.slice(0, -1)}${good.endsWith('q') ? 'p' : 'q'}`;
    expect400(remember(await submitTransaction(mesh, agent, { chain, to: typo, value: '2' })), 'to');
    const mainnet = CSL.EnterpriseAddress.new(1, CSL.Address.from_bech32(from).payment_cred()!)
      .to_address()
      .to_bech32();
    expect400(remember(await submitTransaction(mesh, agent, { chain, to: mainnet, value: '2.0' })), 'to');
    expect400(
      remember(await submitTransaction(mesh, agent, { chain, to: good, value: '2.0', destination_tag: 5 })),
      'destination_tag',
    );
    expect400(remember(await submitTransaction(mesh, agent, { chain, to: good, value: '0.5' })), 'value');
    expect(await transactionCount(mesh, agent.id)).toBe(count);
  });

  it('Idempotency-Key: a repeat returns the same transaction, another body with the key is refused', async () => {
    const to = testnetAddress();
    const key = `k-${randomUUID()}`;
    const body: Body = { chain, to, value: '1.25' };
    const first = remember(await submitTransaction(mesh, agent, body, key));
    if (first.status !== 201) throw new Error(`submit: ${first.status} ${first.text}`);
    const again = remember(await submitTransaction(mesh, agent, body, key));
    expect(again.status).toBe(200);
    expect(again.body['id']).toBe(first.body['id']);
    expect(again.body['tx_hash']).toBe(first.body['tx_hash']);
    const other = remember(await submitTransaction(mesh, agent, { ...body, value: '1.5' }, key));
    expect(other.status).toBe(422);
    expect(other.body).toMatchObject({ type: expect.stringContaining('idempotency_key_reused') });
    // One transaction to `to` reached the node.
    const toThem = [...node.submitted.values()].filter((t) => t.outputs.some((o) => o.address === to));
    expect(toThem).toHaveLength(1);
    const got = remember(await getTransaction(mesh, agent, String(first.body['id'])));
    expect(got.body['tx_hash']).toBe(first.body['tx_hash']);
  });

  it('a payment whose ttl slot passes before any block includes it ends failed (expired), its inputs freed', async () => {
    // Earlier transfers waiting in the mempool go into a block first (the balance below is on chain).
    if (node.mempool().length > 0) node.produceBlock();
    const to = testnetAddress();
    const ttl = node.tip().slot + 40;
    const r = remember(await submitTransaction(mesh, agent, { chain, to, value: '3.0', ttl }));
    if (r.status !== 201) throw new Error(`submit: ${r.status} ${r.text}`);
    const tx = verifySigned(String(r.body['signed_tx']), String(r.body['tx_hash']), publicKey);
    expect(tx.body().ttl_bignum()!.to_str()).toBe(String(ttl));
    // Slots pass with empty blocks: the node drops it from its mempool once the tip reaches the ttl.
    node.advance(40);
    expect(node.mempool()).not.toContain(String(r.body['tx_hash']).replace(/^0x/, ''));
    const done = await waitForStatus(mesh, agent, String(r.body['id']), ['failed', 'expired']);
    seen.push(JSON.stringify(done));
    expect(node.balanceOf(to)).toBe(0n);
    // Its inputs are free again: a payment spending everything the key holds goes through.
    const all = node.balanceOf(from);
    const spendAll = remember(
      await submitTransaction(mesh, agent, { chain, to, value: String(all - 2_000_000n) }),
    );
    if (spendAll.status !== 201) throw new Error(`submit: ${spendAll.status} ${spendAll.text}`);
    const settled = await waitForStatus(mesh, agent, String(spendAll.body['id']), ['confirmed'], () => {
      if (node.mempool().length > 0) node.produceBlock();
    });
    seen.push(JSON.stringify(settled));
    expect(node.balanceOf(to)).toBe(all - 2_000_000n);
  });

  it('a payment answered BadInputsUTxO while no block spent its inputs is not ended failed (left signed for the watcher)', async () => {
    if (node.mempool().length > 0) node.produceBlock();
    node.fund(from, 10_000_000n);
    node.fund(from, 12_000_000n);
    // The same key spends every UTxO it has, outside Custos (another wallet holding the key).
    const sk = CSL.PrivateKey.from_normal_bytes(await privateKeyOf(mesh, agent.id));
    const p = node.parameters;
    const cfg = CSL.TransactionBuilderConfigBuilder.new()
      .fee_algo(
        CSL.LinearFee.new(CSL.BigNum.from_str(String(p.min_fee_a)), CSL.BigNum.from_str(String(p.min_fee_b))),
      )
      .coins_per_utxo_byte(CSL.BigNum.from_str(p.coins_per_utxo_size))
      .pool_deposit(CSL.BigNum.from_str(p.pool_deposit))
      .key_deposit(CSL.BigNum.from_str(p.key_deposit))
      .max_value_size(Number(p.max_val_size))
      .max_tx_size(p.max_tx_size)
      .build();
    const b = CSL.TransactionBuilder.new(cfg);
    const self = CSL.Address.from_bech32(from);
    for (const u of node.utxosOf(from)) {
      b.add_regular_input(
        self,
        CSL.TransactionInput.new(CSL.TransactionHash.from_hex(u.txHash), u.index),
        CSL.Value.new(CSL.BigNum.from_str(u.lovelace.toString())),
      );
    }
    b.set_ttl_bignum(CSL.BigNum.from_str(String(node.tip().slot + 1000)));
    b.add_change_if_needed(self);
    const elsewhere = CSL.FixedTransaction.new_from_body_bytes(b.build().to_bytes());
    elsewhere.add_vkey_witness(CSL.make_vkey_witness(elsewhere.transaction_hash(), sk));
    const res = await fetch(`${node.url}/tx/submit`, {
      method: 'POST',
      headers: { 'content-type': 'application/cbor', project_id: project },
      body: elsewhere.to_bytes(),
    });
    expect(res.status).toBe(200);

    // The other wallet's transaction is only in the node's mempool: the node answers Custos's
    // payment BadInputsUTxO, but that is no proof of a refusal (a re-send of Custos's own
    // transaction is answered the same), so it is not ended failed: it stays `signed` and the
    // watcher sends it again later (refused for good once a block spent its inputs by another).
    const r = remember(await submitTransaction(mesh, agent, { chain, to: testnetAddress(), value: '2.0' }));
    expect(r.status).toBe(201);
    expect(r.body['status']).toBe('signed');
    expect(node.submitted.has(String(r.body['tx_hash']).replace(/^0x/, ''))).toBe(false);
    const got = remember(await getTransaction(mesh, agent, String(r.body['id'])));
    expect(got.body['status']).toBe('signed');
    node.produceBlock();
  });

  it("the agent's private key appears in no answer, audit record, event or log line (canary scan)", async () => {
    const raw = await privateKeyOf(mesh, agent.id);
    expect(raw).toHaveLength(32);
    const sk = CSL.PrivateKey.from_normal_bytes(raw);
    expect(sk.to_public().to_hex()).toBe(publicKey); // the scan looks for the right key
    const corpus = await scanCorpus(mesh, agent.owner.token, seen);
    expect(corpus).toContain(from); // the scan sees this agent's traffic
    expect(corpus).toContain(publicKey);
    for (const secret of [
      raw.toString('hex'),
      raw.toString('base64'),
      raw.toString('base64url'),
      sk.to_bech32(), // ed25519_sk1…
      Buffer.from(sk.as_bytes()).toString('hex'),
    ]) {
      expect(corpus).not.toContain(secret.toLowerCase());
    }
  });
});
