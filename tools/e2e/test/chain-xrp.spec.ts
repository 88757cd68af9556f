import { randomUUID } from 'node:crypto';
import { XrpResponder } from '@custos/chain-responders/xrp';
import {
  Wallet,
  classicAddressToXAddress,
  convertHexToString,
  decode,
  deriveAddress,
  hashes,
  isValidClassicAddress,
  verifySignature,
} from 'xrpl';
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

// Issue 18: XRP Ledger payments through the Intents API of the real mesh, against a local rippled
// (@custos/chain-responders/xrp) that verifies every submitted blob with xrpl.

type Body = Record<string, unknown>;

/** A 400 problem naming `field` (and `type` when given). */
function expectRefusal(r: Reply, field: string, type?: string): void {
  if (r.status !== 400) throw new Error(`expected 400 naming ${field}, got ${r.status}: ${r.text}`);
  expect(r.body).toMatchObject({ status: 400, field, ...(type ? { type } : {}) });
}

describe('XRP Ledger transfers (shared mesh, local rippled)', () => {
  let mesh: Mesh;
  let node: XrpResponder;
  let chain: string;
  let agent: ChainAgent;
  let address: string;
  let publicKey: string;
  const bob = Wallet.generate();
  // Everything the API answered in this spec, scanned for the private key at the end.
  const seen: string[] = [];

  const submit = async (body: Body, idem?: string) => {
    const r = await submitTransaction(mesh, agent, { chain, ...body }, idem);
    seen.push(r.text);
    return r;
  };

  beforeAll(async () => {
    mesh = await sharedMesh();
    node = await XrpResponder.start({ reserveBase: 1_000_000n, reserveInc: 200_000n, networkId: 1 });
    chain = await registerChain(mesh, { family: 'xrp', network: 'testnet', rpcUrl: node.url });
    agent = await chainAgent(mesh, chain);
    seen.push(...agent.seen);
    address = String(agent.key['address']);
    publicKey = String(agent.key['public_key']);
    node.fund(address, 100_000_000n); // 100 XRP
    node.fund(bob.classicAddress, 20_000_000n);
  });
  afterAll(async () => {
    await node?.close();
  });

  it('makes an Ed25519 key whose classic address xrpl accepts and derives from its public key', () => {
    expect(isValidClassicAddress(address)).toBe(true);
    expect(publicKey).toMatch(/^ED[0-9A-F]{64}$/);
    expect(deriveAddress(publicKey)).toBe(address);
    expect(agent.key['curve']).toBe('ed25519');
  });

  it('submits a payment the node verifies and follows it to confirmed', async () => {
    const seq = node.account(address)!.sequence;
    const r = await submit({ to: bob.classicAddress, value: '2.5', memo: 'e2e memo', destination_tag: 4242 });
    if (r.status !== 201) throw new Error(`submit: ${r.status} ${r.text}`);
    expect(r.body).toMatchObject({
      family: 'xrp',
      from: address,
      to: bob.classicAddress,
      value_wei: '2500000',
      nonce: seq,
      status: 'broadcast',
    });
    const signedTx = String(r.body['signed_tx']);
    const txHash = String(r.body['tx_hash']);
    // Independently: the blob is a Payment signed by the agent's key, its hash the tx_hash.
    expect(verifySignature(signedTx, publicKey)).toBe(true);
    expect(hashes.hashSignedTx(signedTx)).toBe(txHash.toUpperCase());
    const tx = decode(signedTx) as Record<string, unknown>;
    expect(tx).toMatchObject({
      TransactionType: 'Payment',
      Account: address,
      Destination: bob.classicAddress,
      Amount: '2500000',
      Sequence: seq,
      DestinationTag: 4242,
      SigningPubKey: publicKey,
    });
    const memos = tx['Memos'] as { Memo: { MemoData: string } }[];
    expect(convertHexToString(memos[0]!.Memo.MemoData)).toBe('e2e memo');
    // The responder verified and applied it.
    expect(node.transaction(txHash)).toMatchObject({ engineResult: 'tesSUCCESS' });

    const done = await waitForStatus(mesh, agent, String(r.body['id']), ['confirmed', 'failed'], () => {
      node.closeLedger();
    });
    seen.push(JSON.stringify(done));
    expect(done['status']).toBe('confirmed');
    const validated = node.transaction(txHash)!;
    expect(validated.validated).toBe(true);
    // The ledger and fee the node reports.
    expect(done['block_number']).toBe(validated.ledgerIndex);
    expect(String(done['fee'])).toBe(String(tx['Fee']));
    expect(done['details']).toMatchObject({ memo: 'e2e memo', destination_tag: '4242' });
    expect(node.account(bob.classicAddress)!.balance).toBe(22_500_000n);
  });

  it('signs only: the blob parses and verifies, and nothing reaches the node', async () => {
    const before = node.submissions.length;
    const r = await signOnly(mesh, agent, { chain, to: bob.classicAddress, value: '1000000' });
    seen.push(r.text);
    if (r.status !== 200 && r.status !== 201) throw new Error(`sign: ${r.status} ${r.text}`);
    expect(r.body['status']).toBe('sign_only');
    const signedTx = String(r.body['signed_tx']);
    expect(verifySignature(signedTx, publicKey)).toBe(true);
    expect(decode(signedTx)).toMatchObject({
      TransactionType: 'Payment',
      Account: address,
      Destination: bob.classicAddress,
      Amount: '1000000',
    });
    expect(hashes.hashSignedTx(signedTx)).toBe(String(r.body['tx_hash']).toUpperCase());
    expect(node.submissions.length).toBe(before);
  });

  it('refuses insufficient funds and a malformed address with 400 naming the field, recording nothing', async () => {
    const before = await transactionCount(mesh, agent.id);
    const submissions = node.submissions.length;
    expectRefusal(await submit({ to: bob.classicAddress, value: '1000.0' }), 'value', 'insufficient_funds');
    expectRefusal(await submit({ to: 'rNotAnXrpAddress', value: '1000' }), 'to');
    expectRefusal(await submit({ to: `${bob.classicAddress.slice(0, -1)}x`, value: '1000' }), 'to');
    // A mainnet X-address on this test network.
    expectRefusal(
      await submit({ to: classicAddressToXAddress(bob.classicAddress, false, false), value: '1000' }),
      'to',
    );
    expectRefusal(await submit({ to: bob.classicAddress, value: '1000', token_mint: 'USD' }), 'token_mint');
    expect(await transactionCount(mesh, agent.id)).toBe(before);
    expect(node.submissions.length).toBe(submissions);
  });

  it('Idempotency-Key: a repeat returns the same transaction, another body with the key is refused', async () => {
    const key = `xrp-${randomUUID()}`;
    const body = { to: bob.classicAddress, value: '1500000' };
    const first = await submit(body, key);
    if (first.status !== 201) throw new Error(`submit: ${first.status} ${first.text}`);
    const again = await submit(body, key);
    expect(again.status).toBe(200);
    expect(again.body['id']).toBe(first.body['id']);
    expect(again.body['tx_hash']).toBe(first.body['tx_hash']);
    const other = await submit({ ...body, value: '1600000' }, key);
    expect(other.status).toBe(422);
    expect(other.body['type']).toBe('idempotency_key_reused');
    // One payment reached the node for the key.
    const sent = node.transactions.filter((t) => t.hash === String(first.body['tx_hash']).toUpperCase());
    expect(sent).toHaveLength(1);
    const done = await waitForStatus(mesh, agent, String(first.body['id']), ['confirmed', 'failed'], () => {
      node.closeLedger();
    });
    expect(done['status']).toBe('confirmed');
    const got = await getTransaction(mesh, agent, String(first.body['id']));
    seen.push(got.text);
  });

  it('ends a payment the ledger never took as failed (expired) once its LastLedgerSequence is validated, and reuses its Sequence', async () => {
    const seq = node.account(address)!.sequence;
    const r = await submit({ to: bob.classicAddress, value: '1200000' });
    if (r.status !== 201) throw new Error(`submit: ${r.status} ${r.text}`);
    expect(r.body['nonce']).toBe(seq);
    const txHash = String(r.body['tx_hash']);
    const lls = (decode(String(r.body['signed_tx'])) as { LastLedgerSequence: number }).LastLedgerSequence;
    // The node loses it and the ledger moves past its LastLedgerSequence before anyone looks again.
    node.drop(txHash);
    while (node.validatedLedgerIndex < lls) node.closeLedger();
    const done = await waitForStatus(mesh, agent, String(r.body['id']), ['confirmed', 'failed']);
    seen.push(JSON.stringify(done));
    expect(done['status']).toBe('failed');
    expect(String(done['error_message'])).toContain('expired');
    // Still in the node's cache (as rippled's TransactionMaster), never validated.
    expect(node.transaction(txHash)).toMatchObject({ dropped: true, validated: false });
    // The Sequence was given back: the next payment uses it and confirms.
    const next = await submit({ to: bob.classicAddress, value: '1300000' });
    if (next.status !== 201) throw new Error(`submit: ${next.status} ${next.text}`);
    expect(next.body['nonce']).toBe(seq);
    const ok = await waitForStatus(mesh, agent, String(next.body['id']), ['confirmed', 'failed'], () => {
      node.closeLedger();
    });
    expect(ok['status']).toBe('confirmed');
  });

  it("the agent's private key appears in no response, log line, event or audit record (canary scan)", async () => {
    const pk = await privateKeyOf(mesh, agent.id);
    expect(pk).toHaveLength(32);
    const hex = pk.toString('hex');
    // The key the mesh holds is the key that signed: it derives the agent's address.
    const w = new Wallet(publicKey, `ED${hex.toUpperCase()}`);
    expect(w.classicAddress).toBe(address);
    const corpus = await scanCorpus(mesh, agent.owner.token, seen);
    expect(corpus).toContain(address.toLowerCase()); // the scan sees the agent's traffic
    expect(corpus).not.toContain(hex);
    expect(corpus).not.toContain(pk.toString('base64').toLowerCase());
  });
});
