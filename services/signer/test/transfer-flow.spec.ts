import http from 'node:http';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { type BitcoinResponder, startBitcoinResponder } from '@custos/chain-responders/bitcoin';
import { LSF_DISABLE_MASTER, XrpResponder } from '@custos/chain-responders/xrp';
import type { SubmitTransactionRequest } from '@custos/proto/custos/signer/v1/transactions';
import { CustosError, createDatabase, createLogger, createPool, migrateSchema } from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { bitcoin } from '../src/adapters/bitcoin/bitcoin-lib';
import { Wallet, decode, verifySignature } from 'xrpl';
import { bitcoinAdapter } from '../src/adapters/bitcoin/index';
import { xrpAdapter } from '../src/adapters/xrp/index';
import type { ChainRecord } from '../src/chains/chain-types';
import { SCHEMA } from '../src/db/schema';
import { EvmRpcPool } from '../src/evm/evm-rpc';
import type { IntentContext, IntentScope } from '../src/intents/intent-context';
import type { ChainAdapter } from '../src/keys/chain-adapter';
import { ANSWER_MARGIN_MS, TransactionService, type SubmitBudget } from '../src/transactions/tx-service';
import { TxStore } from '../src/transactions/tx-store';
import { TxWatcher } from '../src/transactions/tx-watcher';
import type { TxRecord } from '../src/transactions/tx-types';
import { ApprovalGate } from '../src/approvals/approval-gate';
import type { Approvals } from '../src/peers/approvals-client';
import type { Approval, ConsumeApprovalRequest } from '@custos/proto/custos/approvals/v1/messages';
import type { ApprovalRule } from '@custos/proto/custos/identity/v1/agents';

// The non-EVM transfer flow (TransactionService.submit → submitTransfer → recordAndSend, then
// TxWatcher's recover/round) on its failure paths, against real Postgres and the real XRP Ledger
// and Bitcoin (Esplora, regtest) responders, each behind a real HTTP proxy that can hang, forward
// and then drop the answer, answer an HTTP error or a chosen body, or act on the node before it
// forwards: the XRP adapter exercises the Sequence (allocated, given back, reused), Bitcoin the
// inputs (held in tx_inputs, freed, never spent twice).

const logger = createLogger({ service: 'signer-test', level: 'silent' });
const RPC_TIMEOUT = 1500;
/** What submitTransfer needs left before it signs: two node calls and the answer's margin. */
const SIGN_ROOM = 2 * RPC_TIMEOUT + ANSWER_MARGIN_MS;

/** What the proxy does with a request it matches. */
type Mode =
  | 'hang' // never answers: the client times out
  | 'drop' // forwards, the node acts on it, then the connection is cut: the answer is lost
  | { status: number; text?: string } // an HTTP error, not forwarded
  | { json: (body: unknown) => unknown } // a chosen JSON answer, not forwarded
  | { rewrite: (answer: unknown) => unknown } // forwarded, its answer rewritten (a lagging backend)
  | { before: () => void }; // acts on the node, then forwards

interface Rule {
  /** A rippled method (`submit`, `tx` …) or `METHOD /path` (Esplora) matched by the regex. */
  match: RegExp;
  mode: Mode;
  /** Applies this many times, then is removed (unlimited when absent). */
  times?: number;
}

/** A real HTTP proxy in front of one responder. */
async function startProxy(target: () => number) {
  const rules: Rule[] = [];
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let route = `${req.method} ${new URL(req.url ?? '/', 'http://x').pathname}`;
      let parsed: unknown;
      try {
        parsed = body ? JSON.parse(body) : undefined;
        const m = (parsed as { method?: unknown } | undefined)?.method;
        if (typeof m === 'string') route = m;
      } catch {
        /* not JSON (Esplora's POST /tx is hex text) */
      }
      seen.push(route);
      const rule = rules.find((r) => r.match.test(route));
      if (rule && rule.times !== undefined && --rule.times <= 0) rules.splice(rules.indexOf(rule), 1);
      const mode = rule?.mode;
      if (mode === 'hang') return;
      if (mode && typeof mode === 'object' && 'status' in mode) {
        res.writeHead(mode.status, { 'content-type': 'text/plain' });
        res.end(mode.text ?? 'Service Unavailable');
        return;
      }
      if (mode && typeof mode === 'object' && 'json' in mode) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(mode.json(parsed)));
        return;
      }
      if (mode && typeof mode === 'object' && 'before' in mode) mode.before();
      void fetch(`http://127.0.0.1:${target()}${req.url}`, {
        method: req.method ?? 'GET',
        headers: { 'content-type': req.headers['content-type'] ?? 'text/plain' },
        ...(req.method === 'GET' || req.method === 'HEAD' ? {} : { body }),
      })
        .then(async (r) => {
          let text = await r.text();
          if (mode === 'drop') {
            req.socket.destroy(); // the node has it; the answer is lost
            return;
          }
          if (mode && typeof mode === 'object' && 'rewrite' in mode) {
            text = JSON.stringify(mode.rewrite(JSON.parse(text)));
          }
          res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'text/plain' });
          res.end(text);
        })
        .catch(() => req.socket.destroy());
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    rules,
    seen,
    set(match: RegExp, mode: Mode, times?: number) {
      rules.push({ match, mode, ...(times === undefined ? {} : { times }) });
    },
    clear() {
      rules.length = 0;
      seen.length = 0;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
type Proxy = Awaited<ReturnType<typeof startProxy>>;

const caught = async (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    () => undefined,
    (e: unknown) => e,
  );
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('non-EVM transfers against the XRP Ledger and Bitcoin responders and Postgres', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let store: TxStore;
  let rpcPool: EvmRpcPool;
  let xrpNode: XrpResponder;
  let btcNode: BitcoinResponder;
  let xrpProxy: Proxy;
  let btcProxy: Proxy;
  let XRP: ChainRecord;
  let BTC: ChainRecord;

  beforeAll(async () => {
    xrpNode = await XrpResponder.start({ reserveBase: 1_000_000n, reserveInc: 200_000n, networkId: 1 });
    btcNode = await startBitcoinResponder({ network: 'regtest' });
    xrpProxy = await startProxy(() => xrpNode.port);
    btcProxy = await startProxy(() => btcNode.port);
    const base = {
      wsUrl: '',
      explorerUrl: '',
      isTestnet: true,
      isEnabled: true,
      createdAt: new Date(),
      updatedAt: new Date(),
    };
    XRP = {
      ...base,
      id: 'xrp-testnet',
      name: 'xrp-testnet',
      displayName: 'XRP Ledger Testnet',
      chainId: 144n,
      family: 'xrp',
      rpcUrl: xrpProxy.url,
      nativeCurrency: 'XRP',
      nativeDecimals: 6,
    } as ChainRecord;
    BTC = {
      ...base,
      id: 'bitcoin-regtest',
      name: 'bitcoin-regtest',
      displayName: 'Bitcoin Regtest',
      chainId: 18444n,
      family: 'bitcoin',
      rpcUrl: `${btcProxy.url}/api`,
      nativeCurrency: 'BTC',
      nativeDecimals: 8,
    } as ChainRecord;
    rpcPool = new EvmRpcPool(RPC_TIMEOUT);
    database = await createTestDatabase('custos_signer');
    pool = createPool(database.url, 10, logger, 'signer-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    store = new TxStore(createDatabase(pool));
  }, 60_000);
  afterAll(async () => {
    rpcPool?.close();
    await xrpProxy?.close();
    await btcProxy?.close();
    await xrpNode?.close();
    await btcNode?.close();
    await pool?.end();
    await database?.drop();
  });
  afterEach(async () => {
    xrpProxy.clear();
    btcProxy.clear();
    btcNode.setUnresponsive(false);
    // Rows a test leaves broadcast are not the next test's: park them.
    await pool.query(
      "UPDATE signer.transactions SET watch_after = now() + interval '1 hour' WHERE status IN ('broadcast', 'signed', 'pending')",
    );
  });

  interface Agent {
    scope: IntentScope;
    privateKey: Buffer;
    /** The key's address on the chain (XRP: classic; Bitcoin: bcrt1…). */
    from: string;
    submit(
      body?: Partial<SubmitTransactionRequest>,
      budget?: SubmitBudget,
    ): ReturnType<TransactionService['submit']>;
  }

  /** A key of the family, its scope, and a TransactionService whose store may be wrapped. */
  const agent = (
    chain: ChainRecord,
    o: { store?: TxStore; rules?: ApprovalRule[]; approvals?: Approvals } = {},
  ): Agent => {
    const adapter = (chain.family === 'xrp' ? xrpAdapter : bitcoinAdapter) as ChainAdapter;
    const g = adapter.generate();
    const key = {
      id: randomUUID(),
      family: chain.family,
      curve: adapter.curve,
      address: g.address,
      publicKey: g.publicKey,
      keyVersion: 1,
      custody: 'server',
      isActive: true,
    };
    const scope = {
      agent: { kind: 'agent', agentId: randomUUID(), orgId: randomUUID(), intentsApiEnabled: true },
      settings: o.rules ? { createdBy: randomUUID(), actionApprovalPolicy: { rules: o.rules } } : {},
      chain,
      key,
      adapter,
    } as unknown as IntentScope;
    const intents = {
      audited: (_p: unknown, _a: string, _id: string, step: () => Promise<unknown>) => step(),
      open: async () => scope,
      loader: { withKey: async (_k: unknown, fn: (pk: Buffer) => unknown) => fn(Buffer.from(g.privateKey)) },
    } as unknown as IntentContext;
    const service = new TransactionService({
      intents,
      store: o.store ?? store,
      rpc: rpcPool,
      identity: { requireAgentInOrg: async () => undefined },
      logger,
      rpcTimeoutMs: RPC_TIMEOUT,
      staleClaimMs: 60_000,
      ...(o.approvals ? { gate: new ApprovalGate({ approvals: o.approvals, logger }) } : {}),
    });
    const from = adapter.addressFor ? adapter.addressFor(key, chain) : key.address;
    return {
      scope,
      privateKey: g.privateKey,
      from,
      submit: (body = {}, budget) =>
        service.submit(
          scope.agent,
          scope.agent.agentId,
          {
            agentId: scope.agent.agentId,
            chain: chain.name,
            to: chain.family === 'xrp' ? Wallet.generate().classicAddress : otherBtcAddress(),
            value: chain.family === 'xrp' ? '2000000' : '30000',
            data: '',
            simulateFirst: false,
            idempotencyKey: '',
            resumeTxId: '',
            unsupportedFields: [],
            canonicalBody: '',
            ...body,
          } as SubmitTransactionRequest,
          budget,
        ),
    };
  };
  const otherBtcAddress = () => {
    const k = bitcoinAdapter!.generate();
    return bitcoinAdapter!.addressFor!({ address: k.address, publicKey: k.publicKey }, BTC);
  };

  const watcher = (intervalMs = 20) =>
    new TxWatcher(
      {
        store,
        chains: { resolve: async (name: string) => (name === XRP.name ? XRP : BTC) } as never,
        rpc: rpcPool,
        logger,
        adapters: { xrp: xrpAdapter!, bitcoin: bitcoinAdapter! },
      },
      { intervalMs, batch: 50, staleMs: 50, rpcTimeoutMs: RPC_TIMEOUT },
    );
  /** Makes the row due for the watcher's next round now. */
  const due = (id: string) =>
    pool.query("UPDATE signer.transactions SET watch_after = now() - interval '1 second' WHERE id = $1", [
      id,
    ]);
  const row = async (id: string) => (await store.byId(id))!;
  const released = async (keyId: string) =>
    (
      await pool.query<{ nonce: string }>(
        'SELECT nonce FROM signer.released_nonces WHERE key_id = $1 ORDER BY nonce',
        [keyId],
      )
    ).rows.map((r) => Number(r.nonce));
  const inputsOf = async (txId: string) =>
    (
      await pool.query<{ input_ref: string }>(
        'SELECT input_ref FROM signer.tx_inputs WHERE tx_id = $1 ORDER BY input_ref',
        [txId],
      )
    ).rows.map((r) => r.input_ref);
  const rowsOf = async (keyId: string) =>
    (
      await pool.query<{ id: string; status: string }>(
        'SELECT id, status FROM signer.transactions WHERE key_id = $1',
        [keyId],
      )
    ).rows;
  const claimOf = async (agentId: string, key: string) =>
    (
      await pool.query('SELECT 1 FROM signer.tx_idempotency WHERE agent_id = $1 AND idempotency_key = $2', [
        agentId,
        key,
      ])
    ).rowCount;
  /** The outpoints a signed Bitcoin transaction spends, as `txid:vout`. */
  const outpointsOf = (hex: string) =>
    bitcoin.Transaction.fromHex(hex)
      .ins.map((i) => `${Buffer.from(i.hash).reverse().toString('hex')}:${i.index}`)
      .sort();
  const xrpSequenceOf = (blob: string) => (decode(blob) as { Sequence: number }).Sequence;
  const xrpAgent = (drops = 50_000_000n, o: Parameters<typeof agent>[1] = {}) => {
    const a = agent(XRP, o);
    xrpNode.fund(a.from, drops);
    return a;
  };

  describe('1. a broadcast whose answer is lost', () => {
    it('XRP: answered `signed`, Sequence kept; recovery sends the same bytes, the node has them: broadcast, then confirmed at the ledger close', async () => {
      const a = xrpAgent();
      const seq = xrpNode.account(a.from)!.sequence;
      xrpProxy.set(/^submit$/, 'drop');
      const r = await a.submit();
      expect(r.tx.status).toBe('signed');
      expect(r.tx).toMatchObject({ nonce: seq, nonceHeld: true });
      expect(r.tx.sendAttemptedAt).not.toBeNull();
      // The node took it (forwarded before the answer was cut).
      expect(xrpNode.transaction(r.tx.txHash!)).toMatchObject({
        engineResult: 'tesSUCCESS',
        validated: false,
      });
      expect(await released(a.scope.key.id)).toEqual([]);
      xrpProxy.clear();
      await sleep(80); // past staleMs
      const wt = watcher();
      expect(await wt.recover()).toBeGreaterThanOrEqual(1);
      const sent = xrpNode.submissions.filter((s) => s.hash === r.tx.txHash);
      expect(sent.length).toBe(2);
      expect(sent.every((s) => s.blob === r.tx.signedTx)).toBe(true); // the same bytes
      expect(['tefALREADY', 'tefPAST_SEQ']).toContain(sent[1]!.result); // "I have it"
      expect(await row(r.tx.id)).toMatchObject({ status: 'broadcast', nonce: seq, nonceHeld: true });
      expect(xrpNode.transactions.filter((t) => t.tx.Account === a.from)).toHaveLength(1);
      const ledger = xrpNode.closeLedger();
      await due(r.tx.id);
      expect(await wt.round()).toBeGreaterThanOrEqual(1);
      expect(await row(r.tx.id)).toMatchObject({
        status: 'confirmed',
        blockNumber: BigInt(ledger),
        nonce: seq,
        nonceHeld: true,
      });
      expect(xrpNode.account(a.from)!.sequence).toBe(seq + 1);
    });

    it('XRP: a broadcast that times out (node never answers) is `signed`, not an error; the watcher sends it and it confirms', async () => {
      const a = xrpAgent();
      xrpProxy.set(/^submit$/, 'hang');
      const r = await a.submit();
      expect(r.tx.status).toBe('signed');
      expect(xrpNode.transaction(r.tx.txHash!)).toBeUndefined(); // never reached the node
      xrpProxy.clear();
      await sleep(80);
      const wt = watcher();
      expect(await wt.recover()).toBeGreaterThanOrEqual(1);
      expect(xrpNode.transaction(r.tx.txHash!)).toMatchObject({ engineResult: 'tesSUCCESS' });
      expect((await row(r.tx.id)).status).toBe('broadcast');
      xrpNode.closeLedger();
      await due(r.tx.id);
      await wt.round();
      expect((await row(r.tx.id)).status).toBe('confirmed');
    });

    it('Bitcoin: answered `signed`, inputs kept; recovery re-sends, the node has it: broadcast, then confirmed once mined', async () => {
      const a = agent(BTC);
      const utxo = btcNode.fund(a.from, 200_000);
      btcProxy.set(/^POST \/api\/tx$/, 'drop');
      const r = await a.submit();
      expect(r.tx.status).toBe('signed');
      expect(await inputsOf(r.tx.id)).toEqual([`${utxo.txid}:${utxo.vout}`]);
      expect(btcNode.mempool()).toContain(r.tx.txHash);
      btcProxy.clear();
      await sleep(80);
      const wt = watcher();
      expect(await wt.recover()).toBeGreaterThanOrEqual(1);
      expect(await row(r.tx.id)).toMatchObject({ status: 'broadcast' });
      expect(await inputsOf(r.tx.id)).toEqual([`${utxo.txid}:${utxo.vout}`]);
      expect(btcNode.accepted.filter((t) => t.txid === r.tx.txHash)).toHaveLength(1);
      const height = btcNode.mine(1);
      await due(r.tx.id);
      await wt.round();
      expect(await row(r.tx.id)).toMatchObject({ status: 'confirmed', blockNumber: BigInt(height) });
    });
  });

  describe('2. too little time left before signing', () => {
    it('XRP: a deadline too near from the start: 503, nothing recorded or signed, the claim given back; a retry with the same key runs anew', async () => {
      const a = xrpAgent();
      const seq = xrpNode.account(a.from)!.sequence;
      const idempotencyKey = randomUUID();
      const body = { idempotencyKey, to: Wallet.generate().classicAddress };
      const err = await caught(
        a.submit(body, { deadline: Date.now() + SIGN_ROOM - 200, cancelled: () => false }),
      );
      expect(err).toBeInstanceOf(CustosError);
      expect(err).toMatchObject({ kind: 'unavailable' });
      expect(await rowsOf(a.scope.key.id)).toEqual([]);
      expect(await claimOf(a.scope.agent.agentId, idempotencyKey)).toBe(0);
      expect(xrpNode.submissions.filter((s) => s.blob && decode(s.blob).Account === a.from)).toHaveLength(0);
      const again = await a.submit(body);
      expect(again).toMatchObject({ replayed: false, tx: { status: 'broadcast', nonce: seq } });
    });

    it('XRP: time runs out after the Sequence was taken: 503, the row failed with nothing signed, the Sequence and the claim given back; the retry reuses both', async () => {
      // The record itself is slow (a loaded database): the deadline check after it fails.
      const slow = Object.assign(Object.create(store), {
        insertTransfer: async (...args: Parameters<TxStore['insertTransfer']>) => {
          const t = await store.insertTransfer(...args);
          await sleep(700);
          return t;
        },
      }) as TxStore;
      const a = xrpAgent(50_000_000n, { store: slow });
      const seq = xrpNode.account(a.from)!.sequence;
      const idempotencyKey = randomUUID();
      const body = { idempotencyKey, to: Wallet.generate().classicAddress };
      const err = await caught(
        a.submit(body, { deadline: Date.now() + SIGN_ROOM + 400, cancelled: () => false }),
      );
      expect(err).toMatchObject({ kind: 'unavailable' });
      const rows = await rowsOf(a.scope.key.id);
      expect(rows).toHaveLength(1);
      const t = await row(rows[0]!.id);
      expect(t).toMatchObject({
        status: 'failed',
        nonce: seq,
        nonceHeld: false,
        signedTx: null,
        txHash: null,
      });
      expect(await released(a.scope.key.id)).toEqual([seq]);
      expect(await claimOf(a.scope.agent.agentId, idempotencyKey)).toBe(0);
      expect(xrpNode.submissions.filter((s) => decode(s.blob).Account === a.from)).toHaveLength(0);
      // The retry (same key, same body) runs anew and takes the Sequence given back.
      const again = await a.submit(body);
      expect(again).toMatchObject({ replayed: false, tx: { status: 'broadcast', nonce: seq } });
      expect(again.tx.id).not.toBe(t.id);
      expect(xrpSequenceOf(again.tx.signedTx!)).toBe(seq);
      expect(await released(a.scope.key.id)).toEqual([]);
    });

    it('Bitcoin: time runs out after the inputs were taken: 503, the inputs freed; the next transfer spends them', async () => {
      const slow = Object.assign(Object.create(store), {
        insertTransfer: async (...args: Parameters<TxStore['insertTransfer']>) => {
          const t = await store.insertTransfer(...args);
          await sleep(700);
          return t;
        },
      }) as TxStore;
      const a = agent(BTC, { store: slow });
      const utxo = btcNode.fund(a.from, 200_000);
      const err = await caught(
        a.submit({}, { deadline: Date.now() + SIGN_ROOM + 400, cancelled: () => false }),
      );
      expect(err).toMatchObject({ kind: 'unavailable' });
      const rows = await rowsOf(a.scope.key.id);
      expect(rows).toEqual([{ id: expect.any(String), status: 'failed' }]);
      expect(await inputsOf(rows[0]!.id)).toEqual([]);
      expect(await store.inputsInUse(a.scope.key.id, BTC.name)).toEqual(new Set());
      expect(btcNode.accepted.some((t) => t.inputs.some((i) => i.txid === utxo.txid))).toBe(false);
      const next = await a.submit();
      expect(next.tx.status).toBe('broadcast');
      expect(outpointsOf(next.tx.signedTx!)).toEqual([`${utxo.txid}:${utxo.vout}`]);
    });
  });

  describe('3. a broadcast the node refuses', () => {
    it("XRP (tefMASTER_DISABLED): the row answered `failed` with the node's words, bytes dropped, the Sequence given back and reused", async () => {
      const a = xrpAgent();
      const seq = xrpNode.account(a.from)!.sequence;
      // Between prepare and submit the account disables its master key: rippled refuses the payment.
      xrpProxy.set(
        /^submit$/,
        { before: () => xrpNode.setAccount(a.from, { flags: LSF_DISABLE_MASTER }) },
        1,
      );
      const r = await a.submit();
      expect(r.tx.status).toBe('failed');
      expect(r.tx.errorMessage).toMatch(/tefMASTER_DISABLED/);
      expect(r.tx).toMatchObject({ signedTx: null, nonce: seq, nonceHeld: false });
      expect(xrpNode.submissions.at(-1)).toMatchObject({ result: 'tefMASTER_DISABLED' });
      expect(await released(a.scope.key.id)).toEqual([seq]);
      xrpNode.setAccount(a.from, { flags: 0 });
      const next = await a.submit();
      expect(next.tx).toMatchObject({ status: 'broadcast', nonce: seq });
      expect(verifySignature(next.tx.signedTx!)).toBe(true);
      expect(xrpSequenceOf(next.tx.signedTx!)).toBe(seq);
      expect(await released(a.scope.key.id)).toEqual([]);
    });

    it("Bitcoin (-26 from bitcoind, HTTP 400 through Esplora): `failed` with the node's words, bytes dropped, the inputs freed and spent by the next", async () => {
      const a = agent(BTC);
      const utxo = btcNode.fund(a.from, 200_000);
      btcProxy.set(
        /^POST \/api\/tx$/,
        {
          status: 400,
          text: 'sendrawtransaction RPC error: {"code":-26,"message":"min relay fee not met, 100 < 141"}',
        },
        1,
      );
      const r = await a.submit();
      expect(r.tx.status).toBe('failed');
      expect(r.tx.errorMessage).toMatch(/min relay fee not met/);
      expect(r.tx.signedTx).toBeNull();
      expect(await inputsOf(r.tx.id)).toEqual([]);
      const next = await a.submit();
      expect(next.tx.status).toBe('broadcast');
      expect(outpointsOf(next.tx.signedTx!)).toEqual([`${utxo.txid}:${utxo.vout}`]);
      expect(await inputsOf(next.tx.id)).toEqual([`${utxo.txid}:${utxo.vout}`]);
    });
  });

  describe('4. expiry', () => {
    it('XRP: a payment the node drops ends `failed` "expired: …" only after the confirmation window, its Sequence given back and reused', async () => {
      const a = xrpAgent();
      const seq = xrpNode.account(a.from)!.sequence;
      const r = await a.submit();
      expect(r.tx.status).toBe('broadcast');
      xrpNode.drop(r.tx.txHash!); // never applied (still in the node's cache, validated: false)
      const wt = watcher();
      await due(r.tx.id);
      await wt.round();
      expect((await row(r.tx.id)).status).toBe('broadcast'); // its LastLedgerSequence not validated yet
      const lls = Number(r.tx.expiryValue);
      while (xrpNode.validatedLedgerIndex < lls) xrpNode.closeLedger();
      await due(r.tx.id);
      await wt.round();
      // Looks expired: suspected, not concluded.
      let t = await row(r.tx.id);
      expect(t).toMatchObject({ status: 'broadcast', nonceHeld: true });
      expect(t.dropSeenBlock).not.toBeNull();
      await due(r.tx.id);
      await wt.round();
      expect((await row(r.tx.id)).status).toBe('broadcast'); // still within the window
      expect(await released(a.scope.key.id)).toEqual([]);
      await sleep(10_200);
      await due(r.tx.id);
      await wt.round();
      t = await row(r.tx.id);
      expect(t).toMatchObject({ status: 'failed', nonceHeld: false });
      expect(t.errorMessage).toMatch(/^expired: /);
      expect(await released(a.scope.key.id)).toEqual([seq]);
      expect(xrpNode.account(a.from)!.sequence).toBe(seq); // never used on the ledger
      const next = await a.submit();
      expect(next.tx).toMatchObject({ status: 'broadcast', nonce: seq });
      xrpNode.closeLedger();
      await due(next.tx.id);
      await wt.round();
      expect((await row(next.tx.id)).status).toBe('confirmed');
    }, 40_000);

    it('XRP: a payment that looks expired once (a lagging backend: not found, the old Sequence) and is then found validated ends `confirmed`, Sequence kept', async () => {
      const a = xrpAgent();
      const seq = xrpNode.account(a.from)!.sequence;
      const r = await a.submit();
      expect(r.tx.status).toBe('broadcast');
      const ledger = xrpNode.closeLedger(); // validated
      const lls = Number(r.tx.expiryValue);
      while (xrpNode.validatedLedgerIndex < lls) xrpNode.closeLedger();
      // One round's answers come from a backend that lags: `tx` not found, the account's old Sequence.
      xrpProxy.set(
        /^tx$/,
        {
          json: (b) => ({
            result: {
              error: 'txnNotFound',
              error_code: 29,
              error_message: 'Transaction not found.',
              request: (b as { params: unknown[] }).params[0],
              status: 'error',
            },
          }),
        },
        1,
      );
      xrpProxy.set(
        /^account_info$/,
        {
          rewrite: (ans) => {
            const x = ans as { result: { account_data: { Sequence: number; Balance: string } } };
            x.result.account_data.Sequence = seq;
            return x;
          },
        },
        1,
      );
      const wt = watcher();
      await due(r.tx.id);
      await wt.round();
      expect(xrpProxy.rules).toHaveLength(0); // both lagging answers were used
      let t = await row(r.tx.id);
      expect(t).toMatchObject({ status: 'broadcast', nonceHeld: true }); // not concluded on one look
      expect(t.dropSeenBlock).not.toBeNull();
      await sleep(10_200); // past the confirmation window
      await due(r.tx.id);
      await wt.round();
      t = await row(r.tx.id);
      expect(t).toMatchObject({
        status: 'confirmed',
        blockNumber: BigInt(ledger),
        nonce: seq,
        nonceHeld: true,
      });
      expect(await released(a.scope.key.id)).toEqual([]);
    }, 40_000);
  });

  describe('5. parallel Bitcoin transfers of one key', () => {
    it('five transfers on six UTXOs all succeed (the losers of a race re-select), each with its own inputs, never two spending one outpoint; tx_inputs agree with the signed bytes', async () => {
      const a = agent(BTC);
      const funded = Array.from({ length: 6 }, () => btcNode.fund(a.from, 100_000));
      const before = btcNode.accepted.length;
      const refusalsBefore = btcNode.refusals.length;
      const results = await Promise.allSettled(Array.from({ length: 5 }, () => a.submit({ value: '40000' })));
      const ok: TxRecord[] = [];
      for (const res of results) {
        if (res.status === 'fulfilled') ok.push(res.value.tx);
        else expect(res.reason).toMatchObject({ kind: 'conflict', field: 'value' });
      }
      expect(ok.length).toBe(5);
      // They raced: some re-read the UTXOs after losing theirs to a parallel one (the retry path).
      const utxoReads = btcProxy.seen.filter((r) => /^GET \/api\/address\/[^/]+\/utxo$/.test(r)).length;
      expect(utxoReads).toBeGreaterThan(5);
      for (const t of ok) expect(t.status).toBe('broadcast');
      // The node's accepted transactions: no outpoint spent twice; nothing refused (no double spend tried).
      const mine = btcNode.accepted.slice(before);
      expect(mine.map((t) => t.txid).sort()).toEqual(ok.map((t) => t.txHash).sort());
      const spent = mine.flatMap((t) => t.inputs.map((i) => `${i.txid}:${i.vout}`));
      expect(new Set(spent).size).toBe(spent.length);
      expect(btcNode.refusals.length).toBe(refusalsBefore);
      // Every input is one of the funded outputs (or this key's own change).
      const ownTxids = new Set([...funded.map((f) => f.txid), ...mine.map((t) => t.txid)]);
      for (const s of spent) expect(ownTxids.has(s.split(':')[0]!)).toBe(true);
      // The database agrees: each row holds exactly the outpoints its bytes spend.
      for (const t of ok) expect(await inputsOf(t.id)).toEqual(outpointsOf(t.signedTx!));
      const held = await pool.query<{ input_ref: string }>(
        'SELECT input_ref FROM signer.tx_inputs WHERE key_id = $1',
        [a.scope.key.id],
      );
      expect(held.rows.map((r) => r.input_ref).sort()).toEqual([...spent].sort());
      // Nothing recorded for the refused ones.
      const rows = await rowsOf(a.scope.key.id);
      expect(rows.filter((x) => x.status !== 'broadcast')).toEqual([]);
      expect(rows).toHaveLength(ok.length);
    });
  });

  describe('6. account-chain overspend', () => {
    it('XRP: parallel payments beyond the balance are refused 400 insufficient_funds naming `value`, nothing recorded for them; the others go through', async () => {
      // 10 XRP held, 1 XRP reserve: 9 XRP available; three payments of 2.9 XRP fit, a fourth does not.
      const a = xrpAgent(10_000_000n);
      const seq = xrpNode.account(a.from)!.sequence;
      const results = await Promise.allSettled(
        Array.from({ length: 5 }, () => a.submit({ value: '2900000' })),
      );
      const ok = results.filter((r) => r.status === 'fulfilled').map((r) => r.value.tx);
      const refused = results.filter((r) => r.status === 'rejected').map((r) => r.reason as unknown);
      expect(ok).toHaveLength(3);
      expect(refused).toHaveLength(2);
      for (const e of refused) {
        expect(e).toBeInstanceOf(CustosError);
        expect(e).toMatchObject({ kind: 'invalid_argument', field: 'value', type: 'insufficient_funds' });
        expect((e as CustosError).httpStatus).toBe(400);
      }
      const rows = await rowsOf(a.scope.key.id);
      expect(rows).toHaveLength(3);
      expect(ok.map((t) => t.nonce).sort()).toEqual([seq, seq + 1, seq + 2]);
      // Sent out of order, a later Sequence may be held (terPRE_SEQ: `signed`); recovery sends it.
      for (const t of ok) expect(['broadcast', 'signed']).toContain(t.status);
      await sleep(80);
      const wt = watcher();
      for (let i = 0; i < 3; i += 1) await wt.recover();
      xrpNode.closeLedger();
      for (const t of ok) await due(t.id);
      await wt.round();
      for (const t of ok) expect((await row(t.id)).status).toBe('confirmed');
      expect(xrpNode.account(a.from)!.balance).toBe(10_000_000n - 3n * 2_900_010n);
      expect(xrpNode.transactions.filter((t) => t.tx.Account === a.from).map((t) => t.engineResult)).toEqual([
        'tesSUCCESS',
        'tesSUCCESS',
        'tesSUCCESS',
      ]);
    });

    it('XRP: a payment whose balance was read before another payment of the key was broadcast is still checked against it (refused 400, never a tecUNFUNDED_PAYMENT)', async () => {
      // B reads the balance (10 XRP, 9 available), then its record waits; meanwhile A (5 XRP) is
      // recorded, signed and broadcast (the node applies it). B (5 XRP) must then be refused:
      // together they exceed what the key has.
      let first = true;
      let recordB!: () => void;
      const bReadDone = new Promise<void>((r) => (recordB = r));
      let release!: () => void;
      const aDone = new Promise<void>((r) => (release = r));
      const held = Object.assign(Object.create(store), {
        insertTransfer: async (...args: Parameters<TxStore['insertTransfer']>) => {
          if (first) {
            first = false;
            recordB();
            await aDone;
          }
          return store.insertTransfer(...args);
        },
      }) as TxStore;
      const a = xrpAgent(10_000_000n, { store: held });
      const b = a.submit({ value: '5000000' });
      await bReadDone;
      const ra = await a.submit({ value: '5000000' });
      expect(ra.tx.status).toBe('broadcast');
      release();
      const err = await caught(b);
      const rows = await rowsOf(a.scope.key.id);
      const sent = xrpNode.transactions.filter((t) => t.tx.Account === a.from).map((t) => t.engineResult);
      expect({ sent, rows: rows.length }).toEqual({ sent: ['tesSUCCESS'], rows: 1 });
      expect(err).toMatchObject({ kind: 'invalid_argument', field: 'value', type: 'insufficient_funds' });
    });
  });
  describe('7. transfers held for approval (issue 19; a fake approvals peer)', () => {
    const always: ApprovalRule = {
      conditions: [
        {
          type: 'always',
          chains: [],
          addresses: [],
          selectors: [],
          intentTypes: [],
          actions: [],
          actionKinds: [],
        },
      ],
      riskTier: 1,
      skipWhen: [],
      requireWhen: [],
    };
    const fakeApprovals = () => {
      const consumed: ConsumeApprovalRequest[] = [];
      const approvals: Approvals = {
        create: async () => ({ id: randomUUID() }) as Approval,
        consume: async (r) => {
          consumed.push(r);
          return { id: r.approvalId } as Approval;
        },
      };
      return { approvals, consumed };
    };

    it('XRP: held with no Sequence and nothing sent; the resume takes a Sequence for the same row and it confirms', async () => {
      const f = fakeApprovals();
      const a = xrpAgent(50_000_000n, { rules: [always], approvals: f.approvals });
      const to = Wallet.generate().classicAddress;
      const held = await a.submit({ to });
      expect(held.tx).toMatchObject({
        status: 'awaiting_approval',
        nonce: null,
        family: 'xrp',
        valueWei: '2000000',
      });
      expect(xrpProxy.seen.filter((s) => s === 'submit')).toEqual([]);
      const r = await a.submit({ to, resumeTxId: held.tx.id });
      expect(r.tx).toMatchObject({ id: held.tx.id, status: 'broadcast', approvalId: held.tx.approvalId });
      expect(r.tx.nonce).not.toBeNull();
      expect(xrpSequenceOf(r.tx.signedTx!)).toBe(r.tx.nonce);
      expect(f.consumed).toHaveLength(1);
      xrpNode.closeLedger();
      await due(r.tx.id);
      await watcher().round();
      expect((await row(r.tx.id)).status).toBe('confirmed');
    });

    it('Bitcoin: held with no inputs; the resume holds its inputs for the same row', async () => {
      const f = fakeApprovals();
      const a = agent(BTC, { rules: [always], approvals: f.approvals });
      btcNode.fund(a.from, 200_000);
      const to = otherBtcAddress();
      const held = await a.submit({ to });
      expect(held.tx.status).toBe('awaiting_approval');
      expect(await inputsOf(held.tx.id)).toEqual([]);
      const r = await a.submit({ to, resumeTxId: held.tx.id });
      expect(r.tx).toMatchObject({ id: held.tx.id, status: 'broadcast' });
      expect(await inputsOf(held.tx.id)).toEqual(outpointsOf(r.tx.signedTx!));
      expect(f.consumed).toHaveLength(1);
    });
  });
});
