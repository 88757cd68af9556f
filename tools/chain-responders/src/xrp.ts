import { createHash } from 'node:crypto';
import {
  decode,
  deriveAddress,
  encode,
  encodeForSigning,
  hashes,
  isValidClassicAddress,
  verifyKeypairSignature,
} from 'xrpl';
import { type ResponderAnswer, type ResponderRequest, type RunningResponder, serve } from './server.js';

/**
 * A local rippled: the XRP Ledger's JSON-RPC (POST `/` with `{"method", "params": [{…}]}`, answers
 * `{"result": {…, "status": "success" | "error"}}`, HTTP 200 for both, as rippled answers with API
 * version 1) over a small ledger of XRP accounts. Every submitted transaction is decoded with xrpl's
 * binary codec and checked as rippled's preflight/preclaim/doApply would for an XRP Payment: the
 * signature against SigningPubKey, SigningPubKey's address against Account, Sequence, Fee,
 * LastLedgerSequence, NetworkID, the reserve, the destination's creation and destination-tag flag.
 * Accepted transactions are applied to the open ledger and validated when a test closes it.
 */

/** An account of the ledger (an AccountRoot). */
export interface XrpAccount {
  balance: bigint;
  sequence: number;
  ownerCount: number;
  flags: number;
}

/** A transaction the responder accepted (applied to the open ledger or queued). */
export interface XrpRecordedTx {
  hash: string;
  blob: string;
  /** The transaction as xrpl's `decode` reads the blob. */
  tx: Record<string, unknown>;
  /** The engine result it was (or will be, once applied from the queue) applied with. */
  engineResult: string;
  queued: boolean;
  validated: boolean;
  /** Dropped from the open ledger / queue; still in the node's cache (found by `tx`, never applied). */
  dropped?: boolean;
  ledgerIndex?: number;
  transactionIndex?: number;
}

/** Every `submit` the responder answered, refused ones included. */
export interface XrpSubmission {
  blob: string;
  hash?: string;
  /** `engine_result`, or the RPC error (`invalidTransaction` …). */
  result: string;
}

export interface XrpResponderOptions {
  /** Base reserve in drops (mainnet since December 2024: 1 XRP). */
  reserveBase?: bigint;
  /** Owner reserve per object in drops (mainnet: 0.2 XRP). */
  reserveInc?: bigint;
  /** Reference transaction cost in drops. */
  baseFee?: bigint;
  /** The network's NetworkID (0 mainnet, 1 testnet, 2 devnet; above 1024 transactions must carry it). */
  networkId?: number;
  /** The first validated ledger index. */
  firstLedger?: number;
}

/** lsfRequireDestTag: payments to the account must carry a DestinationTag. */
export const LSF_REQUIRE_DEST_TAG = 0x00020000;
/** lsfDisableMaster: the master key may not sign (unused here; kept for tests). */
export const LSF_DISABLE_MASTER = 0x00100000;

const MAX_DROPS = 100_000_000_000_000_000n;

const MESSAGES: Record<string, string> = {
  tesSUCCESS: 'The transaction was applied. Only final in a validated ledger.',
  terQUEUED: 'Held until escalated fee drops.',
  terPRE_SEQ: 'Missing/inapplicable prior transaction.',
  terNO_ACCOUNT: 'The source account does not exist.',
  terINSUF_FEE_B: "Account balance can't pay fee.",
  tefPAST_SEQ: 'This sequence number has already passed.',
  tefALREADY: 'The exact transaction was already in this ledger.',
  tefMAX_LEDGER: 'Ledger sequence too high.',
  tefBAD_AUTH: "Transaction's public key is not authorized.",
  tefMASTER_DISABLED: 'Master key is disabled.',
  telINSUF_FEE_P: 'Fee insufficient.',
  telNETWORK_ID_MAKES_TX_NON_CANONICAL:
    'Transactions submitted to this node/network must NOT include a NetworkID field.',
  telREQUIRES_NETWORK_ID:
    'Transactions submitted to this node/network must include a correct NetworkID field.',
  telWRONG_NETWORK: 'Transaction specifies a Network ID that differs from that of the local node.',
  temREDUNDANT: 'The transaction is redundant.',
  temBAD_AMOUNT: 'Malformed: Bad amount.',
  temBAD_FEE: 'Invalid fee, negative or not XRP.',
  temBAD_CURRENCY: 'Malformed: Bad currency.',
  temBAD_SEND_XRP_PATHS: 'Malformed: Paths are not allowed for XRP to XRP.',
  temBAD_SEND_XRP_MAX: 'Malformed: Send max is not allowed for XRP to XRP.',
  temDST_NEEDED: 'Destination not specified.',
  temINVALID: 'The transaction is ill-formed.',
  temMALFORMED: 'Malformed transaction.',
  temDISABLED: 'The transaction requires logic that is currently disabled.',
  tecUNFUNDED_PAYMENT: 'Insufficient XRP balance to send.',
  tecNO_DST_INSUF_XRP: 'Destination does not exist. Too little XRP sent to create it.',
  tecDST_TAG_NEEDED: 'A destination tag is required.',
};

const ENGINE_CODES: Record<string, number> = {
  tesSUCCESS: 0,
  terQUEUED: -89,
  terPRE_SEQ: -92,
  terNO_ACCOUNT: -96,
  terINSUF_FEE_B: -97,
  tefPAST_SEQ: -190,
  tefALREADY: -198,
  tefMAX_LEDGER: -186,
  tefBAD_AUTH: -196,
  tefMASTER_DISABLED: -188,
  telINSUF_FEE_P: -394,
  telNETWORK_ID_MAKES_TX_NON_CANONICAL: -384,
  telREQUIRES_NETWORK_ID: -385,
  telWRONG_NETWORK: -386,
  temREDUNDANT: -275,
  temBAD_AMOUNT: -298,
  temBAD_FEE: -294,
  temBAD_CURRENCY: -296,
  temBAD_SEND_XRP_PATHS: -284,
  temBAD_SEND_XRP_MAX: -285,
  temDST_NEEDED: -278,
  temINVALID: -277,
  temMALFORMED: -299,
  temDISABLED: -273,
  tecUNFUNDED_PAYMENT: 104,
  tecNO_DST_INSUF_XRP: 125,
  tecDST_TAG_NEEDED: 143,
};

/** rippled's error codes for the RPC errors this responder answers. */
const RPC_ERRORS: Record<string, [number, string]> = {
  actNotFound: [19, 'Account not found.'],
  actMalformed: [35, 'Account malformed.'],
  txnNotFound: [29, 'Transaction not found.'],
  invalidParams: [31, 'Invalid parameters.'],
  unknownCmd: [32, 'Unknown method.'],
  invalidTransaction: [71, 'Invalid transaction.'],
  lgrNotFound: [21, 'ledgerNotFound'],
  notImpl: [8, 'Not implemented.'],
  excessiveLgrRange: [78, 'Ledger range exceeds 1000.'],
  invalidLgrRange: [79, 'Ledger range is invalid.'],
};

function drops(v: unknown): bigint | undefined {
  if (typeof v !== 'string' || !/^\d{1,18}$/.test(v)) return undefined;
  return BigInt(v);
}

function fakeHash(...parts: (string | number)[]): string {
  return createHash('sha512').update(parts.join('|')).digest('hex').slice(0, 64).toUpperCase();
}

/** A local rippled JSON-RPC server over an in-memory ledger. */
export class XrpResponder {
  readonly reserveBase: bigint;
  readonly reserveInc: bigint;
  readonly baseFee: bigint;
  readonly networkId: number;
  /** The fee to get into the open ledger now; a lower Fee (at least the base fee) is queued. */
  openLedgerFee: bigint;
  /** Accepted transactions, in the order accepted. */
  readonly transactions: XrpRecordedTx[] = [];
  /** Every submit, refused ones included. */
  readonly submissions: XrpSubmission[] = [];
  /** Every RPC method called, in order (tests assert what the client asked). */
  readonly calls: { method: string; params: Record<string, unknown> }[] = [];

  private accounts = new Map<string, XrpAccount>();
  private validatedAccounts = new Map<string, XrpAccount>();
  private byHash = new Map<string, XrpRecordedTx>();
  private open: XrpRecordedTx[] = [];
  private queue: XrpRecordedTx[] = [];
  private validatedIndex: number;
  private readonly firstLedger: number;
  private failures: { status: number; text: string }[] = [];
  private stalled = false;
  private running?: RunningResponder;

  private constructor(o: XrpResponderOptions) {
    this.reserveBase = o.reserveBase ?? 1_000_000n;
    this.reserveInc = o.reserveInc ?? 200_000n;
    this.baseFee = o.baseFee ?? 10n;
    this.networkId = o.networkId ?? 1;
    this.firstLedger = o.firstLedger ?? 1000;
    this.validatedIndex = this.firstLedger;
    this.openLedgerFee = this.baseFee;
  }

  /** Starts a responder on a free port of 127.0.0.1. */
  static async start(o: XrpResponderOptions & { port?: number } = {}): Promise<XrpResponder> {
    const r = new XrpResponder(o);
    r.running = await serve((req) => r.handle(req), o.port === undefined ? {} : { port: o.port });
    return r;
  }

  /** The rippled JSON-RPC URL (the chain's `rpc_url`). */
  get url(): string {
    return this.running?.url ?? '';
  }

  get port(): number {
    return this.running?.port ?? 0;
  }

  async close(): Promise<void> {
    this.stalled = false;
    await this.running?.close();
  }

  /** The last validated ledger index. */
  get validatedLedgerIndex(): number {
    return this.validatedIndex;
  }

  /** The open ledger's index (validated + 1). */
  get currentLedgerIndex(): number {
    return this.validatedIndex + 1;
  }

  /**
   * Credits `amount` drops to `address` in the open ledger, creating the account (Sequence = the
   * open ledger's index, as rippled gives accounts since DeletableAccounts). Validated at the next
   * close, or now with `validate`.
   */
  fund(address: string, amount: bigint, o: { validate?: boolean } = {}): void {
    if (!isValidClassicAddress(address)) throw new Error(`not a classic address: ${address}`);
    const a = this.accounts.get(address);
    if (a) a.balance += amount;
    else
      this.accounts.set(address, {
        balance: amount,
        sequence: this.currentLedgerIndex,
        ownerCount: 0,
        flags: 0,
      });
    if (o.validate ?? true) {
      const now = this.accounts.get(address);
      if (now) this.validatedAccounts.set(address, { ...now });
    }
  }

  /** Sets an account's AccountRoot flags (e.g. LSF_REQUIRE_DEST_TAG) and owner count. */
  setAccount(address: string, change: Partial<Pick<XrpAccount, 'flags' | 'ownerCount' | 'sequence'>>): void {
    const a = this.accounts.get(address);
    if (!a) throw new Error(`no account ${address}`);
    Object.assign(a, change);
    const v = this.validatedAccounts.get(address);
    if (v) Object.assign(v, change);
  }

  /** The account in the open ledger (undefined when it does not exist). */
  account(address: string): XrpAccount | undefined {
    const a = this.accounts.get(address);
    return a ? { ...a } : undefined;
  }

  /** A recorded transaction by hash. */
  transaction(hash: string): XrpRecordedTx | undefined {
    return this.byHash.get(hash.toUpperCase());
  }

  /**
   * Closes the open ledger: its transactions are validated in ledger `validated + 1`, queued ones
   * are applied (checked again) into the same ledger or dropped. Returns the new validated index.
   */
  closeLedger(): number {
    const index = this.currentLedgerIndex;
    const queued = this.queue;
    this.queue = [];
    for (const q of queued) {
      this.byHash.delete(q.hash);
      const result = this.check(q.tx, q.hash, { fromQueue: true });
      if (result === 'tesSUCCESS' || result.startsWith('tec')) {
        q.engineResult = this.apply(q.tx, result);
        q.queued = false;
        this.byHash.set(q.hash, q);
        this.open.push(q);
      } else {
        const i = this.transactions.indexOf(q);
        if (i >= 0) this.transactions.splice(i, 1);
      }
    }
    this.open.forEach((t, i) => {
      t.validated = true;
      t.ledgerIndex = index;
      t.transactionIndex = i;
    });
    this.open = [];
    this.validatedIndex = index;
    this.validatedAccounts = this.snapshot();
    return index;
  }

  /**
   * Drops a transaction that is in the open ledger or the queue and not validated (rippled may
   * drop one), undoing its effect. As rippled's TransactionMaster cache, `tx` still finds it,
   * `validated: false`, and it is never applied; `forget`: the node does not know it at all (a
   * restarted server, another server behind the URL): `tx` answers txnNotFound.
   */
  drop(hash: string, o: { forget?: boolean } = {}): void {
    const t = this.byHash.get(hash.toUpperCase());
    if (!t || t.validated || t.dropped)
      throw new Error('only a transaction not validated yet can be dropped');
    if (o.forget) this.byHash.delete(t.hash);
    else t.dropped = true;
    this.transactions.splice(this.transactions.indexOf(t), 1);
    this.queue = this.queue.filter((q) => q !== t);
    if (this.open.includes(t)) {
      this.open = this.open.filter((q) => q !== t);
      this.accounts = new Map([...this.validatedAccounts].map(([k, v]) => [k, { ...v }]));
      const again = this.open;
      this.open = [];
      for (const o of again) {
        o.engineResult = this.apply(o.tx, this.check(o.tx, o.hash, { fromQueue: true }));
        this.open.push(o);
      }
    }
  }

  /** The next `n` requests are answered with HTTP `status` (503 by default) and `text`. */
  failNext(n = 1, status = 503, text = 'Service Unavailable'): void {
    for (let i = 0; i < n; i++) this.failures.push({ status, text });
  }

  /** While stalled, requests get no answer (a client's timeout fires). */
  stall(on = true): void {
    this.stalled = on;
  }

  private snapshot(): Map<string, XrpAccount> {
    return new Map([...this.accounts].map(([k, v]) => [k, { ...v }]));
  }

  private async handle(req: ResponderRequest): Promise<ResponderAnswer> {
    if (this.stalled) {
      await new Promise<void>((resolve) => {
        const t = setInterval(() => {
          if (!this.stalled) {
            clearInterval(t);
            resolve();
          }
        }, 20);
      });
    }
    const failure = this.failures.shift();
    if (failure) return { status: failure.status, text: failure.text };
    if (req.method !== 'POST' || req.path !== '/') {
      // rippled answers a GET on its RPC port with a plain health text and 400 for other paths.
      return { status: req.method === 'GET' ? 200 : 400, text: req.method === 'GET' ? '' : 'Bad Request' };
    }
    let body: { method?: unknown; params?: unknown };
    try {
      body = JSON.parse(req.body) as typeof body;
    } catch {
      return { status: 400, text: 'Unable to parse request: ' };
    }
    const method = typeof body.method === 'string' ? body.method : '';
    const params =
      Array.isArray(body.params) && typeof body.params[0] === 'object' && body.params[0] !== null
        ? (body.params[0] as Record<string, unknown>)
        : {};
    this.calls.push({ method, params });
    return { status: 200, json: { result: this.rpc(method, params) } };
  }

  private error(name: string, params: Record<string, unknown>, extra: Record<string, unknown> = {}) {
    const [code, message] = RPC_ERRORS[name] ?? [-1, name];
    return {
      ...extra,
      error: name,
      error_code: code,
      error_message: message,
      request: params,
      status: 'error',
    };
  }

  private rpc(method: string, params: Record<string, unknown>): Record<string, unknown> {
    switch (method) {
      case 'account_info':
        return this.accountInfo(params);
      case 'fee':
        return {
          current_ledger_size: String(this.open.length),
          current_queue_size: String(this.queue.length),
          drops: {
            base_fee: String(this.baseFee),
            median_fee: String(this.baseFee * 500n),
            minimum_fee: String(this.baseFee),
            open_ledger_fee: String(this.openLedgerFee),
          },
          expected_ledger_size: '1000',
          ledger_current_index: this.currentLedgerIndex,
          levels: {
            median_level: '128000',
            minimum_level: '256',
            open_ledger_level: String((this.openLedgerFee * 256n) / this.baseFee),
            reference_level: '256',
          },
          max_queue_size: '2000',
          status: 'success',
        };
      case 'ledger_current':
        return { ledger_current_index: this.currentLedgerIndex, status: 'success' };
      case 'ledger_closed':
        return {
          ledger_hash: fakeHash('ledger', this.validatedIndex),
          ledger_index: this.validatedIndex,
          status: 'success',
        };
      case 'ledger':
        return this.ledger(params);
      case 'server_info':
        return { info: this.serverInfo(false), status: 'success' };
      case 'server_state':
        return { state: this.serverInfo(true), status: 'success' };
      case 'submit':
        return this.submit(params);
      case 'tx':
        return this.tx(params);
      default:
        return this.error('unknownCmd', params);
    }
  }

  private serverInfo(state: boolean): Record<string, unknown> {
    const xrp = (d: bigint) => Number(d) / 1e6;
    const validated = state
      ? {
          base_fee: Number(this.baseFee),
          close_time: 0,
          hash: fakeHash('ledger', this.validatedIndex),
          reserve_base: Number(this.reserveBase),
          reserve_inc: Number(this.reserveInc),
          seq: this.validatedIndex,
        }
      : {
          age: 1,
          base_fee_xrp: xrp(this.baseFee),
          hash: fakeHash('ledger', this.validatedIndex),
          reserve_base_xrp: xrp(this.reserveBase),
          reserve_inc_xrp: xrp(this.reserveInc),
          seq: this.validatedIndex,
        };
    return {
      build_version: '2.3.0',
      complete_ledgers: `${this.firstLedger}-${this.validatedIndex}`,
      load_factor: 1,
      network_id: this.networkId,
      peers: 0,
      server_state: 'full',
      validated_ledger: validated,
      validation_quorum: 1,
    };
  }

  private ledgerIndexOf(params: Record<string, unknown>): number | 'current' | undefined {
    const li = params.ledger_index ?? 'current';
    if (li === 'current') return 'current';
    if (li === 'validated' || li === 'closed') return this.validatedIndex;
    if (typeof li === 'number' && Number.isInteger(li)) return li;
    if (typeof li === 'string' && /^\d+$/.test(li)) return Number(li);
    return undefined;
  }

  private accountInfo(params: Record<string, unknown>): Record<string, unknown> {
    const account = params.account;
    if (typeof account !== 'string' || !isValidClassicAddress(account))
      return this.error('actMalformed', params);
    const li = this.ledgerIndexOf(params);
    if (li === undefined) return this.error('invalidParams', params);
    const current = li === 'current';
    if (!current && li !== this.validatedIndex) return this.error('lgrNotFound', params);
    const a = (current ? this.accounts : this.validatedAccounts).get(account);
    const where = current
      ? { ledger_current_index: this.currentLedgerIndex, validated: false }
      : {
          ledger_hash: fakeHash('ledger', this.validatedIndex),
          ledger_index: this.validatedIndex,
          validated: true,
        };
    if (!a) return this.error('actNotFound', params, { account, ...where });
    return {
      account_data: {
        Account: account,
        Balance: String(a.balance),
        Flags: a.flags,
        LedgerEntryType: 'AccountRoot',
        OwnerCount: a.ownerCount,
        PreviousTxnID: fakeHash('prev', account),
        PreviousTxnLgrSeq: this.validatedIndex,
        Sequence: a.sequence,
        index: fakeHash('root', account),
      },
      account_flags: { requireDestinationTag: (a.flags & LSF_REQUIRE_DEST_TAG) !== 0 },
      ...where,
      status: 'success',
    };
  }

  private ledger(params: Record<string, unknown>): Record<string, unknown> {
    const li = this.ledgerIndexOf(params);
    if (li === undefined) return this.error('invalidParams', params);
    if (li === 'current') {
      return {
        ledger: {
          closed: false,
          ledger_index: String(this.currentLedgerIndex),
          parent_hash: fakeHash('ledger', this.validatedIndex),
        },
        ledger_current_index: this.currentLedgerIndex,
        status: 'success',
        validated: false,
      };
    }
    if (li < this.firstLedger || li > this.validatedIndex) return this.error('lgrNotFound', params);
    const hash = fakeHash('ledger', li);
    return {
      ledger: {
        closed: true,
        ledger_hash: hash,
        ledger_index: String(li),
        parent_hash: fakeHash('ledger', li - 1),
        transaction_hash: fakeHash('txs', li),
      },
      ledger_hash: hash,
      ledger_index: li,
      status: 'success',
      validated: true,
    };
  }

  private submit(params: Record<string, unknown>): Record<string, unknown> {
    const blob = params.tx_blob;
    if (typeof blob !== 'string' || !/^[0-9A-Fa-f]+$/.test(blob) || blob.length % 2 !== 0) {
      this.submissions.push({ blob: String(blob), result: 'invalidParams' });
      return this.error('invalidParams', params);
    }
    let tx: Record<string, unknown>;
    try {
      tx = decode(blob) as Record<string, unknown>;
    } catch (err) {
      this.submissions.push({ blob, result: 'invalidTransaction' });
      return this.error('invalidTransaction', params, {
        error_exception: `Unable to parse tx_blob: ${err instanceof Error ? err.message : String(err)}`,
      });
    }
    const hash = hashes.hashSignedTx(blob).toUpperCase();
    // Local checks (rippled's checkValidity): a transaction that fails them is not submitted at all.
    const local = this.localChecks(tx);
    if (local) {
      this.submissions.push({ blob, hash, result: 'invalidTransaction' });
      return this.error('invalidTransaction', params, { error_exception: `fails local checks: ${local}` });
    }
    let result = this.check(tx, hash, { fromQueue: false });
    let queued = false;
    if (result === 'tesSUCCESS' && (drops(tx.Fee) ?? 0n) < this.openLedgerFee) {
      result = 'terQUEUED';
      queued = true;
    }
    this.submissions.push({ blob, hash, result });
    const applied = result === 'tesSUCCESS' || result.startsWith('tec');
    if (applied || queued) {
      const rec: XrpRecordedTx = {
        hash,
        blob: blob.toUpperCase(),
        tx,
        engineResult: queued ? result : this.apply(tx, result),
        queued,
        validated: false,
      };
      this.transactions.push(rec);
      this.byHash.set(hash, rec);
      (queued ? this.queue : this.open).push(rec);
    }
    const acct = typeof tx.Account === 'string' ? this.accounts.get(tx.Account) : undefined;
    return {
      accepted: applied || queued,
      account_sequence_available: acct?.sequence ?? 0,
      account_sequence_next: acct?.sequence ?? 0,
      applied,
      broadcast: applied,
      engine_result: result,
      engine_result_code: ENGINE_CODES[result] ?? -1,
      engine_result_message: MESSAGES[result] ?? result,
      kept: applied || queued,
      open_ledger_cost: String(this.openLedgerFee),
      queued,
      status: 'success',
      tx_blob: blob.toUpperCase(),
      tx_json: { ...tx, hash },
      validated_ledger_index: this.validatedIndex,
    };
  }

  /** rippled's checkValidity: well-formed signature fields and a valid single signature. */
  private localChecks(tx: Record<string, unknown>): string | undefined {
    const pub = tx.SigningPubKey;
    const sig = tx.TxnSignature;
    if (typeof pub !== 'string' || pub === '' || typeof sig !== 'string' || sig === '') {
      return 'Invalid signature.';
    }
    let ok = false;
    try {
      ok = verifyKeypairSignature(encodeForSigning(tx as never), sig, pub);
    } catch {
      ok = false;
    }
    return ok ? undefined : 'Invalid signature.';
  }

  /** rippled's preflight and preclaim for an XRP Payment, then the payment's own checks. */
  private check(tx: Record<string, unknown>, hash: string, o: { fromQueue: boolean }): string {
    if (tx.TransactionType !== 'Payment') return 'temDISABLED';
    const account = tx.Account;
    const destination = tx.Destination;
    if (typeof account !== 'string') return 'temMALFORMED';
    if (typeof destination !== 'string') return 'temDST_NEEDED';
    const fee = drops(tx.Fee);
    if (fee === undefined) return 'temBAD_FEE';
    if (typeof tx.Amount !== 'string') return 'temBAD_CURRENCY';
    const amount = drops(tx.Amount);
    if (amount === undefined || amount === 0n || amount > MAX_DROPS) return 'temBAD_AMOUNT';
    if (tx.Paths !== undefined) return 'temBAD_SEND_XRP_PATHS';
    if (tx.SendMax !== undefined) return 'temBAD_SEND_XRP_MAX';
    if (account === destination) return 'temREDUNDANT';
    if (Array.isArray(tx.Memos)) {
      const size = encode({ Memos: tx.Memos } as never).length / 2 - 2;
      if (size > 1024) return 'temINVALID';
    }
    if (this.networkId <= 1024) {
      if (tx.NetworkID !== undefined) return 'telNETWORK_ID_MAKES_TX_NON_CANONICAL';
    } else if (tx.NetworkID === undefined) return 'telREQUIRES_NETWORK_ID';
    else if (tx.NetworkID !== this.networkId) return 'telWRONG_NETWORK';
    const src = this.accounts.get(account);
    if (!src) return 'terNO_ACCOUNT';
    const seq = tx.Sequence;
    if (typeof seq !== 'number') return 'temMALFORMED';
    if (seq > src.sequence) return 'terPRE_SEQ';
    if (seq < src.sequence) return 'tefPAST_SEQ';
    const lls = tx.LastLedgerSequence;
    if (typeof lls === 'number' && this.currentLedgerIndex > lls) return 'tefMAX_LEDGER';
    if (!o.fromQueue && this.byHash.has(hash)) return 'tefALREADY';
    if (fee < this.baseFee) return 'telINSUF_FEE_P';
    if (src.balance < fee) return 'terINSUF_FEE_B';
    const signer = deriveAddress(tx.SigningPubKey as string);
    if (signer !== account) return 'tefBAD_AUTH';
    if ((src.flags & LSF_DISABLE_MASTER) !== 0) return 'tefMASTER_DISABLED';
    // doApply: the fee is claimed from here on; the payment itself may fail with tec.
    const dst = this.accounts.get(destination);
    if (!dst) {
      if (amount < this.reserveBase) return 'tecNO_DST_INSUF_XRP';
    } else if ((dst.flags & LSF_REQUIRE_DEST_TAG) !== 0 && tx.DestinationTag === undefined) {
      return 'tecDST_TAG_NEEDED';
    }
    // Payment::doApply: the balance before the fee must cover the amount and max(reserve, fee).
    const reserve = this.reserveBase + BigInt(src.ownerCount) * this.reserveInc;
    const mmm = reserve > fee ? reserve : fee;
    if (src.balance < amount + mmm) return 'tecUNFUNDED_PAYMENT';
    return 'tesSUCCESS';
  }

  /** Applies a checked transaction to the open ledger: fee and sequence always, the payment on tesSUCCESS. */
  private apply(tx: Record<string, unknown>, result: string): string {
    const src = this.accounts.get(tx.Account as string);
    if (!src) return result;
    src.balance -= drops(tx.Fee) ?? 0n;
    src.sequence += 1;
    if (result === 'tesSUCCESS') {
      const amount = drops(tx.Amount) ?? 0n;
      src.balance -= amount;
      const destination = tx.Destination as string;
      const dst = this.accounts.get(destination);
      if (dst) dst.balance += amount;
      else
        this.accounts.set(destination, {
          balance: amount,
          sequence: this.currentLedgerIndex,
          ownerCount: 0,
          flags: 0,
        });
    }
    return result;
  }

  private tx(params: Record<string, unknown>): Record<string, unknown> {
    const hash = params.transaction;
    if (typeof hash !== 'string' || !/^[0-9A-Fa-f]{64}$/.test(hash))
      return this.error('invalidParams', params);
    const min = params.min_ledger;
    const max = params.max_ledger;
    let searchedAll: boolean | undefined;
    if (min !== undefined || max !== undefined) {
      if (typeof min !== 'number' || typeof max !== 'number' || min > max)
        return this.error('invalidLgrRange', params);
      if (max - min > 1000) return this.error('excessiveLgrRange', params);
      searchedAll = min >= this.firstLedger && max <= this.validatedIndex;
    }
    const t = this.byHash.get(hash.toUpperCase());
    if (
      !t ||
      (t.validated &&
        min !== undefined &&
        ((t.ledgerIndex ?? 0) < (min as number) || (t.ledgerIndex ?? 0) > (max as number)))
    ) {
      return this.error(
        'txnNotFound',
        params,
        searchedAll === undefined ? {} : { searched_all: searchedAll },
      );
    }
    const out: Record<string, unknown> = { ...t.tx, hash: t.hash, validated: t.validated, status: 'success' };
    if (t.validated) {
      out.ledger_index = t.ledgerIndex;
      out.inLedger = t.ledgerIndex;
      out.meta = {
        AffectedNodes: [],
        TransactionIndex: t.transactionIndex ?? 0,
        TransactionResult: t.engineResult,
        ...(t.engineResult === 'tesSUCCESS' ? { delivered_amount: t.tx.Amount } : {}),
      };
    }
    return out;
  }
}

/** Starts a local rippled responder (see XrpResponder). */
export function startXrpResponder(o: XrpResponderOptions & { port?: number } = {}): Promise<XrpResponder> {
  return XrpResponder.start(o);
}
