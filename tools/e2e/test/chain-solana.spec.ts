import { randomUUID } from 'node:crypto';
import { type SolanaResponder, startSolanaResponder } from '@custos/chain-responders/solana';
import {
  TOKEN_PROGRAM_ID,
  decodeTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
  // @ts-expect-error TS1479: the package is ESM-typed but ships CommonJS (its `require` condition), which runs
} from '@solana/spl-token';
import {
  Keypair,
  PublicKey,
  SystemInstruction,
  SystemProgram,
  Transaction,
  TransactionMessage,
  VersionedTransaction,
} from '@solana/web3.js';
// @ts-expect-error TS1479: the package is ESM-typed but ships CommonJS (its `require` condition), which runs
import bs58 from 'bs58';
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

// Issue 18: Solana transfers (SOL and SPL tokens) through the Intents API of the real mesh, against a
// local Solana JSON-RPC node (@custos/chain-responders/solana) that verifies every transaction with
// web3.js (signatures, blockhash, funds) and executes it.

type Body = Record<string, unknown>;
const SOL = 1_000_000_000n;

/** A 400 problem naming `field` (and `type` when given). */
function expectRefusal(r: Reply, field: string, type?: string): void {
  if (r.status !== 400) throw new Error(`expected 400 naming ${field}, got ${r.status}: ${r.text}`);
  expect(r.body).toMatchObject({ status: 400, field, ...(type ? { type } : {}) });
}

/** The wire transaction checked with web3.js alone: one signature, the agent's, valid. */
function verifiedTx(signedTx: string, signer: string) {
  const raw = Buffer.from(signedTx, 'base64');
  const legacy = Transaction.from(raw);
  expect(legacy.verifySignatures(true)).toBe(true);
  expect(legacy.feePayer?.toBase58()).toBe(signer);
  expect(legacy.signatures).toHaveLength(1);
  const vtx = VersionedTransaction.deserialize(raw);
  return {
    signature: bs58.encode(vtx.signatures[0]!),
    instructions: TransactionMessage.decompile(vtx.message).instructions,
  };
}

describe('Solana transfers (shared mesh, local Solana JSON-RPC node)', () => {
  let mesh: Mesh;
  let node: SolanaResponder;
  let chain: string;
  let agent: ChainAgent;
  let address: string;
  let mint: string;
  const bob = Keypair.generate().publicKey.toBase58();
  // Everything the API answered in this spec, scanned for the private key at the end.
  const seen: string[] = [];
  const sends = () => node.calls.filter((c) => c.method === 'sendTransaction').length;
  // Each look of the watcher's wait makes blocks: finality is 32 blocks deep.
  const blocks = () => node.advance(8);

  const submit = async (body: Body, idem?: string) => {
    const r = await submitTransaction(mesh, agent, { chain, ...body }, idem);
    seen.push(r.text);
    return r;
  };
  const settled = async (id: string) => {
    const done = await waitForStatus(mesh, agent, id, ['confirmed', 'failed'], blocks);
    seen.push(JSON.stringify(done));
    return done;
  };

  beforeAll(async () => {
    mesh = await sharedMesh();
    node = await startSolanaResponder();
    chain = await registerChain(mesh, { family: 'solana', network: 'devnet', rpcUrl: node.url });
    agent = await chainAgent(mesh, chain);
    seen.push(...agent.seen);
    address = String(agent.key['address']);
    node.fund(address, 10n * SOL);
    mint = node.createMint(6);
    node.mintTo(mint, address, 100_000_000n); // 100 tokens
  });
  afterAll(async () => {
    await node?.close();
  });

  it('makes an ed25519 key whose address is its base58 public key, on the curve', () => {
    const pk = new PublicKey(address);
    expect(pk.toBase58()).toBe(address);
    expect(PublicKey.isOnCurve(pk.toBytes())).toBe(true);
    expect(agent.key['public_key']).toBe(address);
    expect(agent.key['curve']).toBe('ed25519');
  });

  it('submits a SOL transfer with a memo the node verifies, and follows it to confirmed', async () => {
    const r = await submit({ to: bob, value: '1.5', memo: 'e2e memo' });
    if (r.status !== 201) throw new Error(`submit: ${r.status} ${r.text}`);
    expect(r.body).toMatchObject({
      family: 'solana',
      from: address,
      to: bob,
      value_wei: '1500000000',
      status: 'broadcast',
      nonce: null,
    });
    const details = r.body['details'] as Record<string, string>;
    expect(details).toMatchObject({ network: 'devnet', memo: 'e2e memo', fee_lamports: '5000' });
    const { signature, instructions } = verifiedTx(String(r.body['signed_tx']), address);
    expect(r.body['tx_hash']).toBe(signature);
    const t = SystemInstruction.decodeTransfer(instructions[0]!);
    expect([t.fromPubkey.toBase58(), t.toPubkey.toBase58(), t.lamports]).toEqual([
      address,
      bob,
      1_500_000_000n,
    ]);
    expect(Buffer.from(instructions[1]!.data).toString()).toBe('e2e memo');
    // The node verified and executed it.
    const rec = node.transactions.find((x) => x.signature === signature)!;
    expect(rec).toMatchObject({ err: null, memos: ['e2e memo'], feePayer: address });
    expect(node.balance(bob)).toBe(1_500_000_000n);

    const done = await settled(String(r.body['id']));
    expect(done['status']).toBe('confirmed');
    expect(node.balance(address)).toBe(10n * SOL - 1_500_000_000n - 5000n);
  });

  it('sends SPL tokens, creating the recipient token account, to confirmed', async () => {
    const r = await submit({ to: bob, value: '2.5', token_mint: mint, token_decimals: 6 });
    if (r.status !== 201) throw new Error(`submit: ${r.status} ${r.text}`);
    expect(r.body).toMatchObject({ family: 'solana', to: bob, value_wei: '2500000', status: 'broadcast' });
    const details = r.body['details'] as Record<string, string>;
    const dest = getAssociatedTokenAddressSync(new PublicKey(mint), new PublicKey(bob)).toBase58();
    expect(details).toMatchObject({
      token_mint: mint,
      creates_token_account: 'true',
      destination_token_account: dest,
    });
    const { instructions } = verifiedTx(String(r.body['signed_tx']), address);
    const tc = decodeTransferCheckedInstruction(instructions[1]!, TOKEN_PROGRAM_ID);
    expect([tc.data.amount, tc.data.decimals, tc.keys.destination.pubkey.toBase58()]).toEqual([
      2_500_000n,
      6,
      dest,
    ]);
    const done = await settled(String(r.body['id']));
    expect(done['status']).toBe('confirmed');
    expect(node.tokenBalance(mint, bob)).toBe(2_500_000n);
    expect(node.tokenBalance(mint, address)).toBe(97_500_000n);
  });

  it('signs only: the transaction parses and verifies, and nothing reaches the node', async () => {
    const before = sends();
    const r = await signOnly(mesh, agent, { chain, to: bob, value: '1000000' });
    seen.push(r.text);
    if (r.status !== 200 && r.status !== 201) {
      // The signer's own words on why (its refused-action log line), for the failure's message.
      const why = (mesh.output.get('signer') ?? []).filter((l) => /refused|error/i.test(l)).slice(-3);
      throw new Error(`sign: ${r.status} ${r.text}\n${why.join('\n')}`);
    }
    expect(r.body).toMatchObject({ status: 'sign_only', from: address, fee: '5000' });
    expect(r.body['transaction_id']).toEqual(expect.any(String));
    const { signature, instructions } = verifiedTx(String(r.body['signed_tx']), address);
    expect(r.body['tx_hash']).toBe(signature);
    expect(instructions[0]!.programId.equals(SystemProgram.programId)).toBe(true);
    expect(SystemInstruction.decodeTransfer(instructions[0]!).lamports).toBe(1_000_000n);
    expect(sends()).toBe(before);
    expect(node.transactions.find((x) => x.signature === signature)).toBeUndefined();
  });

  it('refuses insufficient funds, malformed addresses and fields Solana has not, recording nothing', async () => {
    const before = await transactionCount(mesh, agent.id);
    const submitted = sends();
    expectRefusal(await submit({ to: bob, value: '1000.0' }), 'value', 'insufficient_funds');
    expectRefusal(
      await submit({ to: bob, value: '1000.0', token_mint: mint }),
      'value',
      'insufficient_funds',
    );
    expectRefusal(await submit({ to: '0x52908400098527886E0F7030069857D2E4169EE7', value: '1000000' }), 'to');
    expectRefusal(await submit({ to: `${bob}0`, value: '1000000' }), 'to');
    expectRefusal(await submit({ to: bob, value: '1000000', destination_tag: 7 }), 'destination_tag');
    expectRefusal(
      await submit({ to: bob, value: '1.0', token_mint: mint, token_decimals: 9 }),
      'token_decimals',
    );
    expectRefusal(await submit({ to: Keypair.generate().publicKey.toBase58(), value: '1000' }), 'value');
    expect(await transactionCount(mesh, agent.id)).toBe(before);
    expect(sends()).toBe(submitted);
  });

  it("a transaction the node refuses at broadcast (preflight) ends failed with the node's words", async () => {
    node.failNext(
      {
        kind: 'rpc-error',
        code: -32002,
        message: 'Transaction simulation failed: Error processing Instruction 0: custom program error: 0x1',
        data: { err: { InstructionError: [0, { Custom: 1 }] }, logs: [] },
      },
      { method: 'sendTransaction' },
    );
    const r = await submit({ to: bob, value: '1000000' });
    if (r.status !== 201) throw new Error(`submit: ${r.status} ${r.text}`);
    expect(r.body['status']).toBe('failed');
    expect(node.transactions.find((x) => x.signature === r.body['tx_hash'])).toBeUndefined();
    const got = await getTransaction(mesh, agent, String(r.body['id']));
    seen.push(got.text);
    expect(got.body['status']).toBe('failed');
    expect(JSON.stringify(got.body)).toMatch(/custom program error: 0x1/);
  });

  it('a transfer the cluster never includes ends failed as expired once the finalized height passes its last valid height', async () => {
    // The node answers every send (the first and the watcher's re-sends) but never includes it.
    node.failNext({ kind: 'drop' }, { method: 'sendTransaction', count: 10_000 });
    try {
      const r = await submit({ to: bob, value: '1000000' });
      if (r.status !== 201) throw new Error(`submit: ${r.status} ${r.text}`);
      expect(r.body['status']).toBe('broadcast');
      const txHash = String(r.body['tx_hash']);
      const lastValid = Number((r.body['details'] as Record<string, string>)['last_valid_block_height']);
      expect(lastValid).toBeGreaterThan(node.blockHeight);
      const done = await waitForStatus(mesh, agent, String(r.body['id']), ['confirmed', 'failed'], () =>
        node.advance(20),
      );
      seen.push(JSON.stringify(done));
      expect(done['status']).toBe('failed');
      expect(JSON.stringify(done)).toMatch(/expired/);
      expect(node.blockHeight - 32).toBeGreaterThan(lastValid); // finalized past it
      expect(node.dropped).toContain(txHash);
      expect(node.transactions.find((x) => x.signature === txHash)).toBeUndefined();
    } finally {
      node.clearFaults();
    }
  });

  it('Idempotency-Key: a repeat returns the same transaction, another body with the key is refused', async () => {
    const key = `sol-${randomUUID()}`;
    const body = { to: bob, value: '1500000' };
    const first = await submit(body, key);
    if (first.status !== 201) throw new Error(`submit: ${first.status} ${first.text}`);
    const again = await submit(body, key);
    expect(again.status).toBe(200);
    expect(again.body['id']).toBe(first.body['id']);
    expect(again.body['tx_hash']).toBe(first.body['tx_hash']);
    const other = await submit({ ...body, value: '1600000' }, key);
    expect(other.status).toBe(422);
    expect(other.body['type']).toBe('idempotency_key_reused');
    expect(node.transactions.filter((t) => t.signature === first.body['tx_hash'])).toHaveLength(1);
    const done = await settled(String(first.body['id']));
    expect(done['status']).toBe('confirmed');
    const got = await getTransaction(mesh, agent, String(first.body['id']));
    seen.push(got.text);
    expect(got.body['signed_tx']).toBe(first.body['signed_tx']);
  });

  it("the agent's private key appears in no response, log line, event or audit record (canary scan)", async () => {
    const seed = await privateKeyOf(mesh, agent.id);
    expect(seed).toHaveLength(32);
    // The key the mesh holds is the key that signed: it derives the agent's address.
    const kp = Keypair.fromSeed(seed);
    expect(kp.publicKey.toBase58()).toBe(address);
    const corpus = await scanCorpus(mesh, agent.owner.token, seen);
    expect(corpus).toContain(address.toLowerCase()); // the scan sees the agent's traffic
    for (const secret of [
      seed.toString('hex'),
      seed.toString('base64'),
      bs58.encode(seed),
      bs58.encode(kp.secretKey), // the 64-byte form wallets export
      Buffer.from(kp.secretKey).toString('hex'),
      Buffer.from(kp.secretKey).toString('base64'),
      JSON.stringify(Array.from(kp.secretKey)), // solana-keygen's id.json
      Array.from(seed).join(','),
    ]) {
      expect(corpus).not.toContain(secret.toLowerCase());
    }
  });
});
