import http from 'node:http';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { AbiCoder, JsonRpcProvider, Transaction as EthersTx, Wallet, parseUnits } from 'ethers';
import type { SubmitTransactionRequest } from '@custos/proto/custos/signer/v1/transactions';
import { CustosError, createDatabase, createLogger, createPool, migrateSchema } from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { SCHEMA } from '../src/db/schema';
import { EvmRevert, EvmRpcError, EvmRpcPool, describeRpcError, revertReason } from '../src/evm/evm-rpc';
import type { IntentContext, IntentScope } from '../src/intents/intent-context';
import { ANSWER_MARGIN_MS, TransactionService, type SubmitBudget } from '../src/transactions/tx-service';
import { TxStore } from '../src/transactions/tx-store';
import { DROP_CONFIRM_BLOCKS, TxWatcher } from '../src/transactions/tx-watcher';

// The transactions path against a real anvil (through a real HTTP proxy that can hang, drop the
// answer after the node got the request, or answer a JSON-RPC error) and real Postgres: the errors
// ethers 6 really gives for the node's answers, the broadcast's outcomes, and the watcher's recovery.

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { startMeshAnvil } = require(path.join(__dirname, '../../../tools/mesh/dist/anvil.js')) as {
  startMeshAnvil(): Promise<{ url: string; stop(): Promise<void> }>;
};

const logger = createLogger({ service: 'signer-test', level: 'silent' });
const RPC_TIMEOUT = 1500;

/** What the proxy does with a JSON-RPC method: pass it, never answer, forward then drop the answer, or refuse. */
type Mode = 'pass' | 'hang' | 'drop' | { error: string } | { result: unknown } | { status: number };

describe('transactions against anvil and Postgres', () => {
  let anvil: { url: string; stop(): Promise<void> };
  let proxy: http.Server;
  let proxyUrl: string;
  const modes = new Map<string, Mode>();
  const seen = new Map<string, number>(); // requests per method
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let store: TxStore;
  let chain: JsonRpcProvider;
  let rpcPool: EvmRpcPool;

  beforeAll(async () => {
    anvil = await startMeshAnvil();
    chain = new JsonRpcProvider(anvil.url, 31337, { staticNetwork: true });
    proxy = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const payload = JSON.parse(body) as { id: number; method: string };
        const mode = modes.get(payload.method) ?? 'pass';
        seen.set(payload.method, (seen.get(payload.method) ?? 0) + 1);
        if (typeof mode === 'object' && 'status' in mode) {
          res.statusCode = mode.status;
          res.end('too many requests');
          return;
        }
        if (mode === 'hang') return; // the client times out
        if (typeof mode === 'object' && 'result' in mode) {
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify({ jsonrpc: '2.0', id: payload.id, result: mode.result }));
          return;
        }
        if (typeof mode === 'object') {
          res.setHeader('content-type', 'application/json');
          res.end(
            JSON.stringify({ jsonrpc: '2.0', id: payload.id, error: { code: -32000, message: mode.error } }),
          );
          return;
        }
        void fetch(anvil.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
          .then((r) => r.text())
          .then((text) => {
            if (mode === 'drop') {
              req.socket.destroy(); // the node has it; the answer is lost
              return;
            }
            res.setHeader('content-type', 'application/json');
            res.end(text);
          });
      });
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    rpcPool = new EvmRpcPool(RPC_TIMEOUT);
    database = await createTestDatabase('custos_signer');
    pool = createPool(database.url, 10, logger, 'signer-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    store = new TxStore(createDatabase(pool));
  }, 60_000);
  afterAll(async () => {
    rpcPool?.close();
    chain?.destroy();
    proxy?.closeAllConnections();
    await new Promise((r) => proxy?.close(r));
    await anvil?.stop();
    await pool?.end();
    await database?.drop();
  });
  afterEach(async () => {
    modes.clear();
    seen.clear();
    await chain.send('evm_setAutomine', [true]);
  });

  const ANVIL = { name: 'anvil', rpcUrl: '', chainId: 31337n };
  const rpc = () => rpcPool.forChain({ ...ANVIL, rpcUrl: proxyUrl });
  const funded = async () => {
    const w = Wallet.createRandom();
    await chain.send('anvil_setBalance', [w.address, '0x56bc75e2d63100000']); // 100 ETH
    return w;
  };
  const transfer = async (w: Wallet, nonce: number, o: { tip?: bigint; value?: bigint } = {}) => {
    const tip = o.tip ?? parseUnits('1', 'gwei');
    return w.signTransaction({
      type: 2,
      chainId: 31337,
      nonce,
      to: Wallet.createRandom().address,
      value: o.value ?? 1n,
      gasLimit: 21000,
      maxFeePerGas: parseUnits('10', 'gwei') + tip,
      maxPriorityFeePerGas: tip,
    });
  };
  const caught = async (p: Promise<unknown>): Promise<unknown> =>
    p.then(
      () => undefined,
      (e: unknown) => e,
    );

  describe('what the node answers, as ethers 6 gives it', () => {
    it('a re-sent mined transaction is a refusal (nonce used), not a transport error', async () => {
      const w = await funded();
      const raw = await transfer(w, 0);
      await rpc().sendRawTransaction(raw);
      const err = await caught(rpc().sendRawTransaction(raw));
      expect(err).toBeInstanceOf(EvmRpcError);
      expect(err).toMatchObject({ rejected: true, code: 'NONCE_EXPIRED' });
      expect((err as EvmRpcError).nonceUsed).toBe(true);
    });

    it('insufficient funds (send and estimate) and an underpriced replacement are refusals; the same bytes again are "already known"', async () => {
      const poor = Wallet.createRandom();
      const err = await caught(rpc().sendRawTransaction(await transfer(poor, 0)));
      expect(err).toMatchObject({ rejected: true, code: 'INSUFFICIENT_FUNDS' });
      // anvil estimates without checking the balance; geth refuses so (its exact answer, via the proxy).
      modes.set('eth_estimateGas', {
        error: `insufficient funds for gas * price + value: address ${poor.address} have 0 want 1000`,
      });
      const est = await caught(
        rpc().estimateGas({ from: poor.address, to: poor.address, value: 1000n, data: '0x' }),
      );
      expect(est).toBeInstanceOf(EvmRpcError);
      expect(est).toMatchObject({ rejected: true, code: 'INSUFFICIENT_FUNDS' });
      modes.clear();

      await chain.send('evm_setAutomine', [false]);
      const w = await funded();
      const first = await transfer(w, 0, { tip: parseUnits('2', 'gwei') });
      await rpc().sendRawTransaction(first);
      const again = await caught(rpc().sendRawTransaction(first));
      expect(again).toBeInstanceOf(EvmRpcError);
      expect((again as EvmRpcError).alreadyKnown).toBe(true);
      const cheaper = await caught(
        rpc().sendRawTransaction(await transfer(w, 0, { tip: parseUnits('1', 'gwei') })),
      );
      expect(cheaper).toMatchObject({ rejected: true, code: 'REPLACEMENT_UNDERPRICED' });
      await chain.send('evm_mine', []);
    });

    it('a revert is a revert (with its reason); a rate-limit answer or no answer is unavailable, not a revert', async () => {
      const from = (await funded()).address;
      // Init code that reverts with Error("nope"): CODECOPY the payload after it, REVERT.
      const payload = `08c379a0${AbiCoder.defaultAbiCoder().encode(['string'], ['nope']).slice(2)}`;
      const reverting = { from, to: null, value: 0n, data: `0x6064600c60003960646000fd${payload}` };
      const r = await rpc().call(reverting);
      expect(r).toMatchObject({ ok: false, reason: 'nope' });
      expect(await caught(rpc().estimateGas(reverting))).toEqual(new EvmRevert('nope'));
      const empty = await rpc().call({ from, to: null, value: 0n, data: '0x60006000fd' });
      expect(empty).toMatchObject({ ok: false, reason: 'execution reverted (no reason given)' });
      expect(revertReason(await caught(chain.call({ from, data: '0x60006000fd' })))).toBe(
        'execution reverted (no reason given)',
      );

      modes.set('eth_call', { error: 'rate limited, see https://key@rpc.example/v3/SECRET' });
      modes.set('eth_estimateGas', { error: 'rate limited' });
      const call = await caught(rpc().call(reverting));
      expect(call).toBeInstanceOf(EvmRpcError);
      expect(call).toMatchObject({ rejected: false });
      expect((call as Error).message).toContain('rate limited, see <url>');
      expect((call as Error).message).not.toContain('SECRET');
      const est = await caught(rpc().estimateGas(reverting));
      expect(est).toBeInstanceOf(EvmRpcError);
      expect(est).toMatchObject({ rejected: false });
      modes.set('eth_sendRawTransaction', 'hang');
      const hung = await caught(rpc().sendRawTransaction(await transfer(await funded(), 0)));
      expect(hung).toMatchObject({ rejected: false });
      // A rate-limited (HTTP 429) call is tried once, not re-sent with back-off past its timeout.
      modes.set('eth_sendRawTransaction', { status: 429 });
      seen.clear();
      const began = Date.now();
      const limited = await caught(rpc().sendRawTransaction(await transfer(await funded(), 0)));
      expect(limited).toMatchObject({ rejected: false });
      expect(seen.get('eth_sendRawTransaction')).toBe(1);
      expect(Date.now() - began).toBeLessThan(RPC_TIMEOUT);
      expect(describeRpcError(hung)).not.toContain(proxyUrl);
    });
  });

  describe('submit and the watcher', () => {
    const scopeOf = (w: Wallet): IntentScope =>
      ({
        agent: { kind: 'agent', agentId: randomUUID(), orgId: randomUUID(), intentsApiEnabled: true },
        settings: {},
        chain: { ...ANVIL, rpcUrl: proxyUrl, family: 'evm', nativeDecimals: 18, isEnabled: true },
        key: { id: randomUUID(), address: w.address, keyVersion: 1, custody: 'server' },
      }) as unknown as IntentScope;
    const rig = (w: Wallet, o: { failMarkBroadcast?: boolean; rpcTimeoutMs?: number } = {}) => {
      const scope = scopeOf(w);
      const intents = {
        audited: (_p: unknown, _a: string, _id: string, step: () => Promise<unknown>) => step(),
        open: async () => scope,
        loader: {
          withKey: async (_k: unknown, fn: (pk: Buffer) => unknown) =>
            fn(Buffer.from(w.privateKey.slice(2), 'hex')),
        },
      } as unknown as IntentContext;
      const txStore = o.failMarkBroadcast
        ? (Object.assign(Object.create(store), {
            markBroadcast: async () => {
              throw new Error('database connection lost');
            },
          }) as TxStore)
        : store;
      const service = new TransactionService({
        intents,
        store: txStore,
        rpc: rpcPool,
        identity: { requireAgentInOrg: async () => undefined },
        logger,
        rpcTimeoutMs: o.rpcTimeoutMs ?? RPC_TIMEOUT,
        staleClaimMs: 1000,
      });
      const submit = (body: Partial<SubmitTransactionRequest> = {}, budget?: SubmitBudget) =>
        service.submit(
          scope.agent,
          scope.agent.agentId,
          {
            agentId: scope.agent.agentId,
            chain: 'anvil',
            to: Wallet.createRandom().address,
            value: '1000',
            data: '',
            simulateFirst: false,
            idempotencyKey: '',
            resumeTxId: '',
            unsupportedFields: [],
            canonicalBody: '{}',
            ...body,
          } as SubmitTransactionRequest,
          budget,
        );
      return { scope, submit };
    };
    const watcher = (intervalMs = 20, leaseMs?: number) =>
      new TxWatcher(
        {
          store,
          chains: { resolve: async () => ({ ...ANVIL, rpcUrl: proxyUrl }) } as never,
          rpc: rpcPool,
          logger,
        },
        { intervalMs, batch: 50, staleMs: 0, rpcTimeoutMs: RPC_TIMEOUT, leaseMs },
      );
    const held = async (keyId: string) =>
      (
        await pool.query<{ nonce: string }>(
          'SELECT nonce FROM signer.released_nonces WHERE key_id = $1 ORDER BY nonce',
          [keyId],
        )
      ).rows.map((r) => Number(r.nonce));

    it('the answer to the broadcast is lost after the node took it: answered `signed`, nonce kept; the watcher finds it mined and records broadcast then confirmed', async () => {
      const w = await funded();
      const { scope, submit } = rig(w);
      modes.set('eth_sendRawTransaction', 'drop');
      const r = await submit();
      expect(r.tx.status).toBe('signed');
      expect(r.tx.nonceHeld).toBe(true);
      expect(await held(scope.key.id)).toEqual([]);
      await new Promise((res) => setTimeout(res, 300));
      expect(await chain.getTransactionCount(w.address, 'latest')).toBe(1); // mined meanwhile
      modes.clear();
      const wt = watcher();
      // The re-send is refused (nonce too low): the watcher asks the chain and finds it mined.
      expect(await wt.recover()).toBeGreaterThanOrEqual(1);
      expect((await store.byId(r.tx.id))!.status).toBe('broadcast');
      expect(await wt.round()).toBeGreaterThanOrEqual(1);
      expect((await store.byId(r.tx.id))!).toMatchObject({ status: 'confirmed', nonceHeld: true });
      const events = await pool.query<{ name: string }>(
        "SELECT name FROM signer.outbox WHERE name = 'agent.transaction.broadcast' AND payload::text LIKE '%' || $1 || '%'",
        [r.tx.id],
      );
      expect(events.rows.length).toBe(1); // the broadcast event, once, by the watcher
    });

    it("a round renews its rows' lease while a chain call hangs; a stopped replica's lease runs out soon", async () => {
      const w = await funded();
      const { submit } = rig(w);
      const r = await submit();
      expect(r.tx.status).toBe('broadcast');
      const wt = watcher(20, 600);
      const other = async () => (await store.leaseForWatch(100, 600)).map((t) => t.id);
      // The receipt call hangs for RPC_TIMEOUT (1.5 s), well past the 600 ms lease: another replica
      // looking meanwhile never gets the row.
      modes.set('eth_getTransactionReceipt', 'hang');
      const round = wt.round();
      await new Promise((res) => setTimeout(res, 1_000));
      expect(await other()).not.toContain(r.tx.id);
      // …and the lease it holds is short (renewed, not sized for the worst round): a replica killed
      // now would leave the row for at most the lease.
      const { rows } = await pool.query<{ left_ms: number }>(
        'SELECT extract(epoch FROM watch_after - now()) * 1000 AS left_ms FROM signer.transactions WHERE id = $1',
        [r.tx.id],
      );
      expect(Number(rows[0]!.left_ms)).toBeLessThanOrEqual(600);
      expect(await round).toBe(0);
      modes.clear();
      // A replica that leased the row and died (no renewal): the row is back once its lease runs out.
      await new Promise((res) => setTimeout(res, 150));
      expect(await other()).toContain(r.tx.id);
      await wt.round();
      expect((await store.byId(r.tx.id))!.status).toBe('broadcast');
      await new Promise((res) => setTimeout(res, 700));
      expect(await wt.round()).toBeGreaterThanOrEqual(1);
      expect((await store.byId(r.tx.id))!.status).toBe('confirmed');
    });

    it('no answer to the broadcast (timeout): `signed`, nonce held; the watcher sends the same bytes and it is mined', async () => {
      const w = await funded();
      const { submit } = rig(w);
      modes.set('eth_sendRawTransaction', 'hang');
      const r = await submit();
      expect(r.tx.status).toBe('signed');
      expect(await chain.getTransactionCount(w.address, 'latest')).toBe(0);
      modes.clear();
      const wt = watcher();
      expect(await wt.recover()).toBeGreaterThanOrEqual(1);
      expect(await wt.round()).toBeGreaterThanOrEqual(1);
      const t = (await store.byId(r.tx.id))!;
      expect(t).toMatchObject({ status: 'confirmed', nonce: 0 });
      expect(EthersTx.from(t.signedTx!).hash).toBe(t.txHash);
    });

    it('a re-send answered "already known" is broadcast even when a lookup (another backend) does not find it', async () => {
      const w = await funded();
      const { scope, submit } = rig(w);
      modes.set('eth_sendRawTransaction', 'hang');
      const r = await submit();
      expect(r.tx.status).toBe('signed');
      modes.set('eth_sendRawTransaction', { error: 'already known' });
      modes.set('eth_getTransactionByHash', { result: null });
      modes.set('eth_getTransactionReceipt', { result: null });
      await watcher().recover();
      expect((await store.byId(r.tx.id))!).toMatchObject({ status: 'broadcast', nonceHeld: true });
      expect(await held(scope.key.id)).toEqual([]);
    });

    it('a stale `signed` row whose send was never attempted (its request stopped before) ends failed, nonce given back, bytes dropped, nothing sent', async () => {
      const w = await funded();
      const keyId = randomUUID();
      const t = await store.allocateAndInsert(
        {
          id: randomUUID(),
          orgId: randomUUID(),
          agentId: randomUUID(),
          keyId,
          chainName: 'anvil',
          chainId: 31337n,
          fromAddress: w.address,
          toAddress: Wallet.createRandom().address,
          valueWei: '1',
          data: '0x',
          txType: 2,
        },
        0,
        undefined,
      );
      const raw = await transfer(w, t.nonce!);
      await store.markSigned(
        t.id,
        { signedTx: raw, txHash: EthersTx.from(raw).hash! },
        async () => undefined,
      );
      expect(await watcher().recover()).toBeGreaterThanOrEqual(1);
      expect((await store.byId(t.id))!).toMatchObject({ status: 'failed', signedTx: null, nonceHeld: false });
      expect(await held(keyId)).toEqual([0]);
      expect(await chain.getTransactionCount(w.address, 'pending')).toBe(0);
    });

    it('a definite refusal (insufficient funds) gives the nonce back; the next submission reuses it', async () => {
      // Unfunded, with the gas limit given (no estimate): the node refuses the broadcast itself.
      const w = Wallet.createRandom();
      const { scope, submit } = rig(w);
      const refused = await submit({ gasLimit: '21000' });
      expect(refused.tx.status).toBe('failed');
      expect(refused.tx.errorMessage).toMatch(/insufficient funds/i);
      expect(await held(scope.key.id)).toEqual([refused.tx.nonce]);
      await chain.send('anvil_setBalance', [w.address, '0x56bc75e2d63100000']);
      const next = await submit({ gasLimit: '21000' });
      expect(next.tx).toMatchObject({ status: 'broadcast', nonce: refused.tx.nonce });
      expect(await held(scope.key.id)).toEqual([]);
    });

    it('a recorded-broadcast failure after the node took it answers the row (`signed`), never an error; the watcher records the broadcast', async () => {
      const w = await funded();
      const { submit } = rig(w, { failMarkBroadcast: true });
      const r = await submit();
      expect(r.tx.status).toBe('signed');
      const wt = watcher();
      expect(await wt.recover()).toBeGreaterThanOrEqual(1); // "already known" or mined
      expect(await wt.round()).toBeGreaterThanOrEqual(1);
      expect((await store.byId(r.tx.id))!.status).toBe('confirmed');
    });

    it('the estimate fails for insufficient funds: 422 chain_rejected; a rate-limited simulation: 503; nothing stored', async () => {
      const w = Wallet.createRandom();
      const { scope, submit } = rig(w);
      modes.set('eth_estimateGas', {
        error: `insufficient funds for gas * price + value: address ${w.address} have 0 want 1000`,
      });
      const poor = await caught(submit({ value: '1000' }));
      expect(poor).toBeInstanceOf(CustosError);
      expect(poor).toMatchObject({ kind: 'unprocessable', type: 'chain_rejected' });
      modes.clear();
      modes.set('eth_call', { error: 'rate limited' });
      const limited = await caught(submit({ simulateFirst: true }));
      expect(limited).toBeInstanceOf(CustosError);
      expect(limited).toMatchObject({ kind: 'unavailable' });
      const rows = await pool.query('SELECT 1 FROM signer.transactions WHERE key_id = $1', [scope.key.id]);
      expect(rows.rowCount).toBe(0);
    });

    it('a fee cap below the base fee is 422 naming max_fee_per_gas, before any nonce', async () => {
      const w = await funded();
      const { scope, submit } = rig(w);
      const err = await caught(submit({ maxFeePerGas: '2', maxPriorityFeePerGas: '1' }));
      expect(err).toMatchObject({
        kind: 'unprocessable',
        type: 'fee_below_base_fee',
        field: 'max_fee_per_gas',
      });
      const rows = await pool.query('SELECT 1 FROM signer.transactions WHERE key_id = $1', [scope.key.id]);
      expect(rows.rowCount).toBe(0);
    });

    it('too little time left before the caller gives up: 503 before any nonce is taken, nothing sent, the Idempotency-Key given back', async () => {
      const w = await funded();
      const { scope, submit } = rig(w);
      const idempotencyKey = randomUUID();
      const err = await caught(
        submit({ idempotencyKey }, { deadline: Date.now() + RPC_TIMEOUT, cancelled: () => false }),
      );
      expect(err).toMatchObject({ kind: 'unavailable' });
      const rows = await pool.query('SELECT 1 FROM signer.transactions WHERE key_id = $1', [scope.key.id]);
      expect(rows.rowCount).toBe(0);
      expect(await held(scope.key.id)).toEqual([]);
      expect(await chain.getTransactionCount(w.address, 'pending')).toBe(0);
      // The retry with the same key runs anew.
      const again = await submit({ idempotencyKey });
      expect(again).toMatchObject({ replayed: false, tx: { status: 'broadcast', nonce: 0 } });
    });

    it("a broadcast that outlasts the caller's deadline (less the answer's margin) is answered `signed`, in time; the watcher follows it", async () => {
      const w = await funded();
      // The service budgets 200 ms per chain call but the endpoint's call may take 1.5 s: the race
      // against the deadline, not the call's timeout, bounds the answer.
      const { submit } = rig(w, { rpcTimeoutMs: 200 });
      modes.set('eth_sendRawTransaction', 'hang');
      const began = Date.now();
      const deadline = began + 2 * 200 + ANSWER_MARGIN_MS + 500;
      const r = await submit({}, { deadline, cancelled: () => false });
      expect(r.tx.status).toBe('signed');
      expect(Date.now()).toBeLessThanOrEqual(deadline - ANSWER_MARGIN_MS + 150);
      modes.clear();
      const wt = watcher();
      expect(await wt.recover()).toBeGreaterThanOrEqual(1);
      expect(await wt.round()).toBeGreaterThanOrEqual(1);
      expect((await store.byId(r.tx.id))!.status).toBe('confirmed');
    });

    it('a mined transaction whose receipt one backend does not have yet (nonce count from another) is never concluded dropped', async () => {
      await chain.send('evm_setAutomine', [false]);
      const w = await funded();
      const { submit } = rig(w);
      const a = await submit();
      expect(a.tx.status).toBe('broadcast');
      await chain.send('evm_mine', []);
      // The receipt lookups reach a backend that has not seen the block; the node knows the hash.
      modes.set('eth_getTransactionReceipt', { result: null });
      await new Promise((res) => setTimeout(res, 150));
      const wt = watcher();
      for (let i = 0; i < 3; i += 1) {
        await chain.send('anvil_mine', ['0x3']);
        await store.watchLater(a.tx.id, -1000);
        await wt.round();
        expect((await store.byId(a.tx.id))!).toMatchObject({ status: 'broadcast', dropSeenBlock: null });
      }
      modes.clear();
      await store.watchLater(a.tx.id, -1000);
      await wt.round();
      expect((await store.byId(a.tx.id))!.status).toBe('confirmed');
    });

    it('a broadcast transaction whose nonce the chain passed (replaced) ends failed; one the node lost is sent again', async () => {
      await chain.send('evm_setAutomine', [false]);
      const w = await funded();
      const { submit } = rig(w);
      const a = await submit();
      expect(a.tx.status).toBe('broadcast');
      // The key replaces it (same nonce, higher tip) outside signer, and it is mined.
      await chain.send('eth_sendRawTransaction', [await transfer(w, 0, { tip: parseUnits('50', 'gwei') })]);
      await chain.send('evm_mine', []);
      const b = await submit();
      expect(b.tx).toMatchObject({ status: 'broadcast', nonce: 1 });
      await chain.send('anvil_dropTransaction', [b.tx.txHash]);
      await new Promise((res) => setTimeout(res, 150));
      const wt = watcher();
      await wt.round();
      // Suspected, not concluded: the same answer is needed DROP_CONFIRM_BLOCKS blocks later.
      expect((await store.byId(a.tx.id))!).toMatchObject({ status: 'broadcast' });
      expect((await store.byId(a.tx.id))!.dropSeenBlock).not.toBeNull();
      await store.watchLater(a.tx.id, -1000);
      await wt.round();
      expect((await store.byId(a.tx.id))!.status).toBe('broadcast'); // no new block yet
      await chain.send('anvil_mine', ['0x' + DROP_CONFIRM_BLOCKS.toString(16)]);
      await store.watchLater(a.tx.id, -1000);
      await wt.round();
      expect((await store.byId(a.tx.id))!).toMatchObject({
        status: 'failed',
        errorMessage: expect.stringMatching(/replaced or dropped/),
      });
      // b was re-sent from its stored bytes: mining now confirms it.
      await chain.send('evm_mine', []);
      await store.watchLater(b.tx.id, -1000);
      await wt.round();
      expect((await store.byId(b.tx.id))!.status).toBe('confirmed');
    });
  });
});
