import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { createDatabase, createLogger, createPool, migrateSchema } from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { SCHEMA } from '../src/db/schema';
import { InputsTakenError, OverspendError, TxStore } from '../src/transactions/tx-store';
import { TxWatcher } from '../src/transactions/tx-watcher';

const logger = createLogger({ service: 'signer-test', level: 'silent' });

// Transactions in Postgres: nonces per key and chain under concurrency, given back and reused,
// reconciled with the chain; Idempotency-Key claims under races; the watcher's leases.
describe('transaction store in Postgres', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let store: TxStore;

  beforeAll(async () => {
    database = await createTestDatabase('custos_signer');
    pool = createPool(database.url, 24, logger, 'signer-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    store = new TxStore(createDatabase(pool));
  });
  afterAll(async () => {
    await pool?.end();
    await database?.drop();
  });

  const rowOf = (keyId: string, agentId = randomUUID()) => ({
    id: randomUUID(),
    orgId: randomUUID(),
    agentId,
    keyId,
    chainName: 'anvil',
    chainId: 31337n,
    fromAddress: '0x' + '11'.repeat(20),
    toAddress: '0x' + '22'.repeat(20),
    valueWei: '1',
    data: '0x',
    txType: 2,
  });

  it('20 parallel allocations of one key get 20 distinct consecutive nonces; another key or chain starts at 0', async () => {
    const keyId = randomUUID();
    const rows = await Promise.all(
      Array.from({ length: 20 }, () => store.allocateAndInsert(rowOf(keyId), 0, undefined)),
    );
    expect(rows.map((r) => r.nonce).sort((a, b) => a! - b!)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(rows.every((r) => r.status === 'pending' && r.nonceHeld)).toBe(true);
    expect((await store.allocateAndInsert(rowOf(randomUUID()), 0, undefined)).nonce).toBe(0);
    expect((await store.allocateAndInsert({ ...rowOf(keyId), chainId: 1n }, 0, undefined)).nonce).toBe(0);
  });

  it('a nonce given back is reused first; the chain being ahead raises the next nonce and drops passed ones', async () => {
    const keyId = randomUUID();
    const made = [];
    for (let i = 0; i < 4; i += 1) made.push(await store.allocateAndInsert(rowOf(keyId), 0, undefined));
    const failed = await store.failBeforeBroadcast(made[1]!.id, 'node refused', async () => undefined);
    expect(failed).toMatchObject({ status: 'failed', nonceHeld: false, nonce: 1 });
    // A second give-back of the same row does nothing.
    expect(await store.failBeforeBroadcast(made[1]!.id, 'again', async () => undefined)).toBeUndefined();
    const reused = await store.allocateAndInsert(rowOf(keyId), 0, undefined);
    expect(reused.nonce).toBe(1);
    expect((await store.allocateAndInsert(rowOf(keyId), 2, undefined)).nonce).toBe(4);
    await store.failBeforeBroadcast(made[2]!.id, 'node refused', async () => undefined);
    // The chain passed nonce 2 meanwhile (used elsewhere): dropped, the chain's pending nonce is next.
    expect((await store.allocateAndInsert(rowOf(keyId), 9, undefined)).nonce).toBe(9);
    expect((await store.allocateAndInsert(rowOf(keyId), 3, undefined)).nonce).toBe(10);
  });

  const transferOf = (keyId: string, chainName = 'bitcoin-regtest') => ({
    ...rowOf(keyId),
    chainName,
    chainId: 1n,
    family: 'bitcoin',
    fromAddress: 'bcrt1qexample',
    toAddress: 'bcrt1qrecipient',
    txType: 0,
    fee: '141',
  });

  it('parallel transfers wanting the same inputs: the database lets exactly one hold them; the others record nothing', async () => {
    const keyId = randomUUID();
    const inputs = [`${'ab'.repeat(32)}:0`, `${'cd'.repeat(32)}:1`];
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) =>
        store.insertTransfer(transferOf(keyId), undefined, i % 2 ? inputs : [inputs[1]!], undefined),
      ),
    );
    const won = results.filter((r) => r.status === 'fulfilled');
    expect(won).toHaveLength(1);
    for (const r of results) {
      if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(InputsTakenError);
    }
    const held = await store.inputsInUse(keyId, 'bitcoin-regtest');
    const winner = (won[0] as PromiseFulfilledResult<Awaited<ReturnType<TxStore['insertTransfer']>>>).value;
    expect(held.size).toBe(
      (await pool.query('SELECT 1 FROM signer.tx_inputs WHERE tx_id = $1', [winner.id])).rowCount,
    );
    const { rows } = await pool.query(
      'SELECT count(*)::int AS n FROM signer.transactions WHERE key_id = $1',
      [keyId],
    );
    expect(rows[0].n).toBe(1);
    // The same outpoint on another chain is another output: not held.
    await store.insertTransfer(transferOf(keyId, 'bitcoin-testnet'), undefined, inputs, undefined);
    // Failed before the node: its inputs are free again.
    await store.failBeforeBroadcast(winner.id, 'node refused', async () => undefined);
    expect((await store.inputsInUse(keyId, 'bitcoin-regtest')).size).toBe(0);
    await store.insertTransfer(transferOf(keyId), undefined, inputs, undefined);
  });

  it('an expired transfer frees its inputs and gives its sequence back; a settled one keeps them', async () => {
    const keyId = randomUUID();
    const a = await store.insertTransfer(
      { ...transferOf(keyId, 'xrp-testnet'), family: 'xrp' },
      7,
      [],
      undefined,
    );
    expect(a).toMatchObject({ status: 'pending', nonce: 7, nonceHeld: true });
    const b = await store.insertTransfer(
      { ...transferOf(keyId, 'xrp-testnet'), family: 'xrp' },
      7,
      [],
      undefined,
    );
    expect(b.nonce).toBe(8);
    for (const t of [a, b]) {
      await store.markSigned(t.id, { signedTx: 'aa', txHash: `h${t.id}` }, async () => undefined);
      await store.markSendAttempted(t.id);
      await store.markBroadcast(t.id, async () => undefined);
    }
    const audits: string[] = [];
    const expired = await store.expire(a.id, 'expired: LastLedgerSequence passed', async (_tx, t) => {
      audits.push(t.status);
    });
    expect(expired).toMatchObject({ status: 'failed', nonceHeld: false });
    expect(audits).toEqual(['failed']);
    expect(await store.expire(a.id, 'again', async () => undefined)).toBeUndefined();
    // Its sequence comes back first.
    const c = await store.insertTransfer(
      { ...transferOf(keyId, 'xrp-testnet'), family: 'xrp' },
      7,
      [],
      undefined,
    );
    expect(c.nonce).toBe(7);
    const settled = await store.settleTransfer(
      b.id,
      { ok: true, block: 42n, fee: 12n },
      async () => undefined,
    );
    expect(settled).toMatchObject({ status: 'confirmed', blockNumber: 42n, fee: '12' });
    const failedOnChain = await store.insertTransfer(
      transferOf(keyId),
      undefined,
      [`${'ef'.repeat(32)}:0`],
      undefined,
    );
    await store.markSigned(failedOnChain.id, { signedTx: 'bb', txHash: 'h2' }, async () => undefined);
    await store.markSendAttempted(failedOnChain.id);
    await store.markBroadcast(failedOnChain.id, async () => undefined);
    const f = await store.settleTransfer(
      failedOnChain.id,
      { ok: false, reason: 'tecUNFUNDED_PAYMENT' },
      async () => undefined,
    );
    expect(f).toMatchObject({ status: 'failed' });
    expect(f!.errorMessage).toContain('tecUNFUNDED_PAYMENT');
    // Included on chain: its input is spent for good, still held.
    expect(await store.inputsInUse(keyId, 'bitcoin-regtest')).toContain(`${'ef'.repeat(32)}:0`);
  });

  it('parallel transfers of an account key cannot together spend more than the chain says it has', async () => {
    const keyId = randomUUID();
    const chain = 'solana-devnet';
    const row = () => ({ ...transferOf(keyId, chain), family: 'solana', valueWei: '300', fee: '5' });
    const spend = { native: 305n, available: { native: 1000n } };
    const results = await Promise.allSettled(
      Array.from({ length: 6 }, () => store.insertTransfer(row(), undefined, [], undefined, spend)),
    );
    const won = results.filter((r) => r.status === 'fulfilled');
    expect(won).toHaveLength(3); // 3 × 305 = 915 ≤ 1000 < 4 × 305
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(OverspendError);
    // A token transfer counts its fee against the native balance and its value against the token's.
    await expect(
      store.insertTransfer(
        { ...row(), valueWei: '50', fee: '5', details: { token_mint: 'Mint1' } },
        undefined,
        [],
        undefined,
        {
          native: 5n,
          token: 50n,
          tokenMint: 'Mint1',
          available: { native: 1000n, token: 60n },
        },
      ),
    ).resolves.toMatchObject({ status: 'pending' });
    await expect(
      store.insertTransfer(
        { ...row(), valueWei: '20', fee: '5', details: { token_mint: 'Mint1' } },
        undefined,
        [],
        undefined,
        {
          native: 5n,
          token: 20n,
          tokenMint: 'Mint1',
          available: { native: 10_000n, token: 60n },
        },
      ),
    ).rejects.toBeInstanceOf(OverspendError);
  });

  it('in flight: a broadcast transfer counts until it is settled, a settled one does not; expected fees count, not fee limits (nor a malformed one); an empty token_mint is native', async () => {
    const keyId = randomUUID();
    const chain = 'tron-nile';
    const row = (extra: Record<string, unknown> = {}) => ({
      ...transferOf(keyId, chain),
      family: 'tron',
      valueWei: '300',
      fee: '5',
      ...extra,
    });
    const check = (native: bigint, available: bigint) => ({ native, available: { native: available } });
    const sent = async (id: string) => {
      await store.markSigned(id, { signedTx: 'aa', txHash: `h${id}` }, async () => undefined);
      await store.markSendAttempted(id);
      await store.markBroadcast(id, async () => undefined);
    };
    const a = await store.insertTransfer(row(), undefined, [], undefined);
    await sent(a.id); // accepted by the node, not yet included: the balance may not show it
    await expect(
      store.insertTransfer(row(), undefined, [], undefined, check(305n, 609n)),
    ).rejects.toBeInstanceOf(OverspendError);
    await store.settleTransfer(a.id, { ok: true, block: 7n }, async () => undefined); // now in the balance
    const b = await store.insertTransfer(row(), undefined, [], undefined, check(305n, 609n));
    expect(b.status).toBe('pending');
    await sent(b.id);
    await store.settleTransfer(b.id, { ok: true, block: 8n }, async () => undefined);
    // A TRC-20 transfer in flight counts its expected burn (7), not its fee limit (100,000,005).
    const trc = await store.insertTransfer(
      row({ valueWei: '10', fee: '100000005', details: { token_mint: 'TToken', expected_fee: '7' } }),
      undefined,
      [],
      undefined,
      { native: 7n, token: 10n, tokenMint: 'TToken', available: { native: 1_000n, token: 10n } },
    );
    expect(trc.status).toBe('pending');
    await expect(
      store.insertTransfer(row(), undefined, [], undefined, check(305n, 312n)),
    ).resolves.toMatchObject({ status: 'pending' }); // 7 + 305 ≤ 312
    // A row stored with an empty token_mint counts its value as native; a malformed expected_fee
    // counts the fee (it never breaks the check).
    await store.insertTransfer(
      row({ details: { token_mint: '', expected_fee: '1.5e3x' } }),
      undefined,
      [],
      undefined,
    );
    await expect(
      store.insertTransfer(row(), undefined, [], undefined, check(305n, 7n + 305n + 305n + 304n)),
    ).rejects.toBeInstanceOf(OverspendError);
    await expect(
      store.insertTransfer(row(), undefined, [], undefined, check(305n, 7n + 305n + 305n + 305n)),
    ).resolves.toMatchObject({ status: 'pending' });
  });

  it('the database refuses two rows holding one nonce', async () => {
    const keyId = randomUUID();
    const a = await store.allocateAndInsert(rowOf(keyId), 0, undefined);
    await expect(
      pool.query(
        `INSERT INTO signer.transactions (id, org_id, agent_id, key_id, chain_name, chain_id, from_address, value_wei,
           nonce, nonce_held, tx_type, status) VALUES ($1, $2, $2, $3, 'anvil', 31337, '0x', 0, $4, true, 2, 'pending')`,
        [randomUUID(), randomUUID(), keyId, a.nonce],
      ),
    ).rejects.toMatchObject({ code: '23505' });
  });

  it('parallel claims of one Idempotency-Key: exactly one wins, the others see it running, another body is told', async () => {
    const agentId = randomUUID();
    const claims = await Promise.all(Array.from({ length: 12 }, () => store.claim(agentId, 'k1', 'h1')));
    const won = claims.filter((c) => c.kind === 'claimed');
    expect(won).toHaveLength(1);
    expect(claims.filter((c) => c.kind === 'running')).toHaveLength(11);
    expect(await store.claim(agentId, 'k1', 'h2')).toEqual({ kind: 'other_body' });
    // Linked to a finished transaction, the claim answers it.
    const t = await store.allocateAndInsert(rowOf(randomUUID(), agentId), 0, {
      key: 'k1',
      claimId: won[0]!.claimId,
    });
    expect(await store.claim(agentId, 'k1', 'h1')).toEqual({ kind: 'running' });
    await store.failBeforeBroadcast(t.id, 'x', async () => undefined);
    expect(await store.claim(agentId, 'k1', 'h1')).toMatchObject({ kind: 'done', tx: { id: t.id } });
    // Another agent's same key is its own; a given-back claim can be claimed again.
    expect(await store.claim(randomUUID(), 'k1', 'h1')).toMatchObject({ kind: 'claimed' });
    const k2 = await store.claim(agentId, 'k2', 'h1');
    expect(k2).toMatchObject({ kind: 'claimed' });
    await store.unclaim(agentId, { key: 'k2', claimId: (k2 as { claimId: string }).claimId });
    expect(await store.claim(agentId, 'k2', 'h9')).toMatchObject({ kind: 'claimed' });
  });

  it('a held transaction whose approval was never asked for (signer stopped) ends failed, audited, and frees its key', async () => {
    const agentId = randomUUID();
    const held = async (key: string) => {
      const c = await store.claim(agentId, key, 'h1');
      expect(c).toMatchObject({ kind: 'claimed' });
      return store.insertFinal(
        { ...rowOf(randomUUID(), agentId), status: 'awaiting_approval' },
        { key, claimId: (c as { claimId: string }).claimId },
        async () => undefined,
      );
    };
    const young = await held('young');
    const old = await held('old');
    await pool.query(
      `UPDATE signer.transactions SET created_at = now() - interval '10 minutes' WHERE id = $1`,
      [old.id],
    );
    // A young one is still being asked for: running, untouched.
    expect(await store.claim(agentId, 'young', 'h1')).toEqual({ kind: 'running' });
    expect(await store.byId(young.id)).toMatchObject({ status: 'awaiting_approval' });
    // Another body is still told so (nothing changed).
    expect(await store.claim(agentId, 'old', 'h2')).toEqual({ kind: 'other_body' });
    expect(await store.byId(old.id)).toMatchObject({ status: 'awaiting_approval' });
    // Ten minutes old with no approval id: abandoned. Racing claims: exactly one takes the key over.
    const racers = await Promise.all(Array.from({ length: 6 }, () => store.claim(agentId, 'old', 'h1')));
    expect(racers.filter((c) => c.kind === 'claimed')).toHaveLength(1);
    expect(racers.filter((c) => c.kind === 'running')).toHaveLength(5);
    expect(await store.byId(old.id)).toMatchObject({
      status: 'failed',
      errorMessage: 'the approval was never asked for: signer stopped',
    });
    const audit = await pool.query<{ payload: string }>(
      "SELECT payload::text AS payload FROM signer.outbox WHERE payload::text LIKE '%' || $1 || '%' AND payload::text LIKE '%agent.transaction.failed%'",
      [old.id],
    );
    expect(audit.rowCount).toBe(1);
    expect(audit.rows[0]!.payload).toContain('the approval was never asked for: signer stopped');
    // One with its approval id is a held transaction, whatever its age: the key answers it.
    const named = await held('named');
    await store.setApproval(named.id, randomUUID());
    await pool.query(
      `UPDATE signer.transactions SET created_at = now() - interval '10 minutes' WHERE id = $1`,
      [named.id],
    );
    expect(await store.claim(agentId, 'named', 'h1')).toMatchObject({ kind: 'done', tx: { id: named.id } });
  });

  it('recovery ends a held transaction never named its approval (10 minutes old, no key) failed and audited; a young one or a named one stays', async () => {
    const agentId = randomUUID();
    const held = () =>
      store.insertFinal(
        { ...rowOf(randomUUID(), agentId), status: 'awaiting_approval' },
        undefined,
        async () => undefined,
      );
    const [old, young, named] = [await held(), await held(), await held()];
    await store.setApproval(named.id, randomUUID());
    await pool.query(
      `UPDATE signer.transactions SET created_at = now() - interval '10 minutes' WHERE id = ANY($1::uuid[])`,
      [[old.id, named.id]],
    );
    const w = new TxWatcher(
      { store, chains: { resolve: async () => undefined } as never, rpc: {} as never, logger },
      { intervalMs: 10, staleMs: 0, batch: 1000 },
    );
    expect(await w.recover()).toBeGreaterThanOrEqual(1);
    expect(await store.byId(old.id)).toMatchObject({
      status: 'failed',
      errorMessage: 'the approval was never asked for: signer stopped',
    });
    expect(await store.byId(young.id)).toMatchObject({ status: 'awaiting_approval' });
    expect(await store.byId(named.id)).toMatchObject({ status: 'awaiting_approval' });
    const audit = await pool.query(
      "SELECT 1 FROM signer.outbox WHERE payload::text LIKE '%' || $1 || '%' AND payload::text LIKE '%agent.transaction.failed%'",
      [old.id],
    );
    expect(audit.rowCount).toBe(1);
  });

  it('a claim left with no transaction (its request died) is taken over once older than the recovery delay, by one racer', async () => {
    const agentId = randomUUID();
    const first = await store.claim(agentId, 'dead', 'h1', 60_000);
    expect(first).toMatchObject({ kind: 'claimed' });
    expect(await store.claim(agentId, 'dead', 'h1', 60_000)).toEqual({ kind: 'running' });
    await pool.query(
      `UPDATE signer.tx_idempotency SET created_at = now() - interval '2 minutes' WHERE agent_id = $1`,
      [agentId],
    );
    const racers = await Promise.all(
      Array.from({ length: 8 }, () => store.claim(agentId, 'dead', 'h1', 60_000)),
    );
    const taker = racers.filter((c) => c.kind === 'claimed');
    expect(taker).toHaveLength(1);
    expect(racers.filter((c) => c.kind === 'running')).toHaveLength(7);
    const old = { key: 'dead', claimId: (first as { claimId: string }).claimId };
    const now = { key: 'dead', claimId: taker[0]!.claimId };
    // The first request, still alive after all, can neither give back nor link the taker's claim:
    // its recording is refused (409) and rolled back, with no nonce taken.
    const keyId = randomUUID();
    await store.unclaim(agentId, old);
    expect(await store.claim(agentId, 'dead', 'h1', 60_000)).toEqual({ kind: 'running' });
    await expect(store.allocateAndInsert(rowOf(keyId, agentId), 0, old)).rejects.toMatchObject({
      kind: 'conflict',
      field: 'Idempotency-Key',
    });
    await expect(
      store.insertFinal(
        { ...rowOf(keyId, agentId), status: 'simulation_failed' },
        old,
        async () => undefined,
      ),
    ).rejects.toMatchObject({ kind: 'conflict' });
    const none = await pool.query('SELECT 1 FROM signer.transactions WHERE key_id = $1', [keyId]);
    expect(none.rowCount).toBe(0);
    // A claim with a transaction still running is never taken over before 24 h.
    const t = await store.allocateAndInsert(rowOf(keyId, agentId), 0, now);
    expect(t.nonce).toBe(0);
    await pool.query(
      `UPDATE signer.tx_idempotency SET created_at = now() - interval '2 hours' WHERE agent_id = $1`,
      [agentId],
    );
    expect(await store.claim(agentId, 'dead', 'h1', 60_000)).toEqual({ kind: 'running' });
    expect(t.status).toBe('pending');
  });

  it('a failure before the broadcast drops the signed bytes; with `unclaim` it gives the Idempotency-Key back too', async () => {
    const agentId = randomUUID();
    const c = (await store.claim(agentId, 'gone', 'h1')) as { kind: 'claimed'; claimId: string };
    const t = await store.allocateAndInsert(rowOf(randomUUID(), agentId), 0, {
      key: 'gone',
      claimId: c.claimId,
    });
    await store.markSigned(
      t.id,
      { signedTx: '0x02f8aa', txHash: '0x' + 'ab'.repeat(32) },
      async () => undefined,
    );
    const f = await store.failBeforeBroadcast(t.id, 'out of time', async () => undefined, { unclaim: true });
    expect(f).toMatchObject({ status: 'failed', signedTx: null, nonceHeld: false });
    expect((await store.byId(t.id))!.signedTx).toBeNull();
    // The retry runs anew (claimed), rather than replaying `failed`.
    expect(await store.claim(agentId, 'gone', 'h1')).toMatchObject({ kind: 'claimed' });
    // Without `unclaim` (a definite refusal answered as the row) the key keeps answering it.
    const c2 = (await store.claim(agentId, 'kept', 'h1')) as { kind: 'claimed'; claimId: string };
    const t2 = await store.allocateAndInsert(rowOf(randomUUID(), agentId), 0, {
      key: 'kept',
      claimId: c2.claimId,
    });
    await store.failBeforeBroadcast(t2.id, 'refused', async () => undefined);
    expect(await store.claim(agentId, 'kept', 'h1')).toMatchObject({ kind: 'done', tx: { id: t2.id } });
  });

  it('renewing leases moves those still running; a row whose lease ran out is left to the next round', async () => {
    const keyId = randomUUID();
    const [held, lapsed] = [
      await store.allocateAndInsert(rowOf(keyId), 0, undefined),
      await store.allocateAndInsert(rowOf(keyId), 1, undefined),
    ];
    await pool.query(
      `UPDATE signer.transactions SET status = 'broadcast',
         watch_after = CASE WHEN id = $1 THEN now() + interval '1 second' ELSE now() - interval '1 second' END
       WHERE id IN ($1, $2)`,
      [held.id, lapsed.id],
    );
    await store.renewLease([held.id, lapsed.id], 60_000);
    const after = await pool.query<{ id: string; ahead: boolean }>(
      `SELECT id, watch_after > now() + interval '50 seconds' AS ahead FROM signer.transactions WHERE id IN ($1, $2)`,
      [held.id, lapsed.id],
    );
    expect(Object.fromEntries(after.rows.map((r) => [r.id, r.ahead]))).toEqual({
      [held.id]: true,
      [lapsed.id]: false,
    });
  });

  it('renewing leases leaves rows no longer broadcast or signed alone', async () => {
    const keyId = randomUUID();
    const rows = [];
    for (const status of ['broadcast', 'signed', 'confirmed', 'failed']) {
      const t = await store.allocateAndInsert(rowOf(keyId), rows.length, undefined);
      await pool.query(
        `UPDATE signer.transactions SET status = $2, watch_after = now() + interval '1 second' WHERE id = $1`,
        [t.id, status],
      );
      rows.push({ id: t.id, status });
    }
    await store.renewLease(
      rows.map((r) => r.id),
      60_000,
    );
    const after = await pool.query<{ status: string; ahead: boolean }>(
      `SELECT status, watch_after > now() + interval '50 seconds' AS ahead FROM signer.transactions WHERE id = ANY($1)`,
      [rows.map((r) => r.id)],
    );
    expect(Object.fromEntries(after.rows.map((r) => [r.status, r.ahead]))).toEqual({
      broadcast: true,
      signed: true,
      confirmed: false,
      failed: false,
    });
  });

  it('a watcher starts no lease renewal while the previous one is still running', async () => {
    let running = 0;
    let most = 0;
    let calls = 0;
    const slow = Object.create(store) as TxStore;
    slow.renewLease = async (ids: string[], ms: number) => {
      calls += 1;
      running += 1;
      most = Math.max(most, running);
      await new Promise((r) => setTimeout(r, 200));
      await store.renewLease(ids, ms);
      running -= 1;
    };
    const w = new TxWatcher(
      { store: slow, chains: { resolve: async () => undefined } as never, rpc: {} as never, logger },
      { intervalMs: 10, leaseMs: 60, staleMs: 1000, batch: 10 },
    );
    const keep = (
      w as unknown as { keepLeased<T>(h: Set<string>, f: () => Promise<T>): Promise<T> }
    ).keepLeased.bind(w);
    await keep(new Set([randomUUID()]), () => new Promise((r) => setTimeout(r, 700)));
    expect(calls).toBeGreaterThanOrEqual(2);
    expect(most).toBe(1);
  });

  it("two watchers' leases never share a row, and a leased row waits for its lease", async () => {
    const keyId = randomUUID();
    const ids: string[] = [];
    for (let i = 0; i < 10; i += 1) {
      const t = await store.allocateAndInsert(rowOf(keyId), 0, undefined);
      await pool.query(
        `UPDATE signer.transactions SET status = 'broadcast', watch_after = now() WHERE id = $1`,
        [t.id],
      );
      ids.push(t.id);
    }
    const [a, b] = await Promise.all([store.leaseForWatch(6, 60_000), store.leaseForWatch(6, 60_000)]);
    const mine = [...a!, ...b!].map((t) => t.id).filter((id) => ids.includes(id));
    expect(new Set(mine).size).toBe(mine.length);
    expect(mine.sort()).toEqual([...ids].sort());
    expect((await store.leaseForWatch(100, 60_000)).filter((t) => ids.includes(t.id))).toEqual([]);
    // The receipt's record is written with it, once (a second settle of the row finds nothing).
    const recorded: string[] = [];
    const record = async (_tx: unknown, t: { status: string }) => {
      recorded.push(t.status);
    };
    const settled = await store.settle(ids[0]!, { ok: true, blockNumber: 7n, gasUsed: 21000n }, record);
    expect(settled).toMatchObject({ status: 'confirmed', blockNumber: 7n, gasUsed: '21000' });
    expect(await store.settle(ids[0]!, { ok: false, blockNumber: 8n, gasUsed: 1n }, record)).toBeUndefined();
    expect(recorded).toEqual(['confirmed']);
  });
});
