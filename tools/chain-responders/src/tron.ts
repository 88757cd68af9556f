import { createHash } from 'node:crypto';
import { TronWeb, utils } from 'tronweb';
import { type ResponderAnswer, type ResponderRequest, type RunningResponder, serve } from './server.js';

/**
 * A local TRON full node (java-tron's HTTP API, `/wallet/…`) for tests: a ledger of TRX accounts
 * and TRC-20 tokens, blocks that tests produce, and `/wallet/broadcasttransaction` that verifies
 * every transaction with tronweb's own protobuf encoder and signature recovery and answers as
 * java-tron does, errors included (codes with hex-encoded messages).
 */

/** The chain parameters the responder charges (sun), as `/wallet/getchainparameters` lists them. */
export interface TronResponderFees {
  transactionFee: number;
  createAccountFee: number;
  createNewAccountFeeInSystemContract: number;
  memoFee: number;
  energyFee: number;
  /** Energy a TRC-20 transfer uses to a holder that has a balance, and to a new holder. */
  energyTransfer: number;
  energyTransferNewHolder: number;
  /** Energy a reverted TRC-20 transfer uses. */
  energyRevert: number;
}

const DEFAULT_FEES: TronResponderFees = {
  transactionFee: 1000,
  createAccountFee: 100_000,
  createNewAccountFeeInSystemContract: 1_000_000,
  memoFee: 1_000_000,
  energyFee: 420,
  energyTransfer: 14_650,
  energyTransferNewHolder: 29_650,
  energyRevert: 1_200,
};

/** A block (its header fields and the transactions it holds). */
export interface TronBlockRecord {
  number: number;
  timestamp: number;
  blockID: string;
  parentHash: string;
  txIds: string[];
}

/** A transaction the responder verified and accepted. */
export interface VerifiedTronTx {
  txID: string;
  type: 'TransferContract' | 'TriggerSmartContract';
  /** Base58 addresses. */
  from: string;
  to: string;
  /** TRX sun, or the token's base units. */
  amount: bigint;
  /** TRC-20: the token contract (base58). */
  token?: string;
  /** `raw_data.data` as UTF-8 ('' when none). */
  memo: string;
  feeLimit: number;
  expiration: number;
  /** The public key the signature recovered to (`0x04…`). */
  signer: string;
  /** The transaction JSON as broadcast. */
  json: Record<string, unknown>;
}

interface Token {
  symbol: string;
  /** null: the contract has no `decimals()` (the call reverts). */
  decimals: number | null;
  balances: Map<string, bigint>;
  /** What `transfer` does on a shortfall: revert (as OpenZeppelin's ERC-20) or return false (old tokens). */
  shortfall: 'revert' | 'false';
  /** Senders whose transfers revert ("Blacklistable: account is blacklisted", as USDT's). */
  blacklist: Set<string>;
}

interface TxRecord {
  tx: VerifiedTronTx;
  rawHex: string;
  signedBytes: number;
  blockNumber?: number;
  info?: Record<string, unknown>;
  contractRet?: string;
}

interface Ledger {
  accounts: Map<string, { balance: bigint; createTime: number }>;
  tokens: Map<string, Token>;
}

/** Hex of UTF-8 text, as java-tron writes `message`. */
const hexMsg = (s: string): string => Buffer.from(s, 'utf8').toString('hex');
/** A Solidity revert's data: `Error(string)` ABI-encoded (selector 08c379a0). */
function revertData(reason: string): string {
  const bytes = Buffer.from(reason, 'utf8');
  const word = (v: bigint): string => v.toString(16).padStart(64, '0');
  const padded = bytes.toString('hex').padEnd(Math.ceil(bytes.length / 32) * 64, '0');
  return `08c379a0${word(32n)}${word(BigInt(bytes.length))}${padded}`;
}
const sha256 = (b: Buffer): Buffer => createHash('sha256').update(b).digest();

/** `41…` hex of a base58 or hex address; '' when it is neither. */
function hexOf(a: unknown): string {
  if (typeof a !== 'string' || a === '') return '';
  if (/^41[0-9a-fA-F]{40}$/.test(a)) return a.toLowerCase();
  if (TronWeb.isAddress(a) && a.startsWith('T')) return TronWeb.address.toHex(a).toLowerCase();
  return '';
}
const b58 = (hex: string): string => TronWeb.address.fromHex(hex);

interface ProtoRaw {
  getContractList(): Array<{
    getType(): number;
    getParameter(): { getValue_asU8(): Uint8Array; getTypeUrl(): string };
  }>;
  getRefBlockBytes_asU8(): Uint8Array;
  getRefBlockHash_asU8(): Uint8Array;
  getExpiration(): number;
  getTimestamp(): number;
  getFeeLimit(): number;
  getData_asU8(): Uint8Array;
}
interface Proto {
  Transaction: { raw: { deserializeBinary(b: Uint8Array): ProtoRaw } };
  TransferContract: {
    deserializeBinary(b: Uint8Array): {
      getOwnerAddress_asU8(): Uint8Array;
      getToAddress_asU8(): Uint8Array;
      getAmount(): number;
    };
  };
  TriggerSmartContract: {
    deserializeBinary(b: Uint8Array): {
      getOwnerAddress_asU8(): Uint8Array;
      getContractAddress_asU8(): Uint8Array;
      getCallValue(): number;
      getCallTokenValue(): number;
      getData_asU8(): Uint8Array;
    };
  };
}
const proto = (): Proto => (globalThis as unknown as { TronWebProto: Proto }).TronWebProto;
const hx = (b: Uint8Array): string => Buffer.from(b).toString('hex');

/** A java-tron error answer (HTTP 200, a code and the hex-encoded message). */
class NodeError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** A running local Tron node. */
export class TronResponder {
  private ledger: Ledger = { accounts: new Map(), tokens: new Map() };
  readonly blocks: TronBlockRecord[] = [];
  private readonly txs = new Map<string, TxRecord>();
  private pending: string[] = [];
  /** Every transaction verified and accepted, in broadcast order. */
  readonly verified: VerifiedTronTx[] = [];
  /** Every broadcast's answer code (`SUCCESS` or the error code), in order. */
  readonly broadcasts: string[] = [];
  /** Every request path served, in order. */
  readonly requests: string[] = [];
  private clockOffset = 0;
  /** How many blocks the solidified head lags behind the head (java-tron: about 19). */
  private solidLag: number;
  private failures: Array<{ status: number; path?: string }> = [];
  private hanging = false;
  private releaseHung: Array<() => void> = [];
  readonly fees: TronResponderFees;
  private running!: RunningResponder;

  private constructor(fees: Partial<TronResponderFees>, solidLag: number) {
    this.fees = { ...DEFAULT_FEES, ...fees };
    this.solidLag = solidLag;
    this.blocks.push(this.makeBlock(0, this.now() - 3000, '0'.repeat(64), []));
  }

  /** Starts a responder on 127.0.0.1 (a free port unless given). */
  static async start(
    o: { port?: number; fees?: Partial<TronResponderFees>; solidLag?: number } = {},
  ): Promise<TronResponder> {
    const r = new TronResponder(o.fees ?? {}, o.solidLag ?? 0);
    r.running = await serve((req) => r.handle(req), { port: o.port });
    return r;
  }

  /** The full node's base URL (a chain's `rpc_url`). */
  get url(): string {
    return this.running.url;
  }

  async close(): Promise<void> {
    this.resume();
    await this.running.close();
  }

  /** The node's clock (ms): the wall clock plus what `advanceTime` added. */
  now(): number {
    return Date.now() + this.clockOffset;
  }

  /** Moves the node's clock forward (blocks produced after carry the later time). */
  advanceTime(ms: number): void {
    this.clockOffset += ms;
  }

  /** Credits `sun` to an account (creating it): a faucet. */
  fund(address: string, sun: bigint | number): void {
    const h = this.requireHex(address);
    const a = this.ledger.accounts.get(h) ?? { balance: 0n, createTime: this.now() };
    a.balance += BigInt(sun);
    this.ledger.accounts.set(h, a);
  }

  /** An account's TRX balance in sun (0 for an account the chain does not have). */
  balanceOf(address: string): bigint {
    return this.ledger.accounts.get(this.requireHex(address))?.balance ?? 0n;
  }

  /** True when the account exists on chain (activated). */
  hasAccount(address: string): boolean {
    return this.ledger.accounts.has(this.requireHex(address));
  }

  /** Deploys a TRC-20 token; returns its contract address (base58). */
  deployToken(o: { symbol: string; decimals: number | null; shortfall?: 'revert' | 'false' }): string {
    const seed = sha256(Buffer.from(`${o.symbol}:${this.ledger.tokens.size}:${Math.random()}`));
    const h = `41${seed.subarray(0, 20).toString('hex')}`;
    this.ledger.tokens.set(h, {
      symbol: o.symbol,
      decimals: o.decimals,
      balances: new Map(),
      shortfall: o.shortfall ?? 'revert',
      blacklist: new Set(),
    });
    return b58(h);
  }

  /** The token's owner blacklists `address`: its transfers revert (as USDT's `addBlackList`). */
  blacklist(contract: string, address: string): void {
    const t = this.ledger.tokens.get(this.requireHex(contract));
    if (!t) throw new Error(`no token at ${contract}`);
    t.blacklist.add(this.requireHex(address));
  }

  /** Sets how many blocks the solidified head lags behind the head (0: every block is solid). */
  setSolidLag(blocks: number): void {
    this.solidLag = Math.max(0, blocks);
  }

  /** The solidified head's number. */
  solidNumber(): number {
    return Math.max(0, this.head().number - this.solidLag);
  }

  /** Mints `amount` base units of a token to `address`. */
  mintToken(contract: string, address: string, amount: bigint | number): void {
    const t = this.ledger.tokens.get(this.requireHex(contract));
    if (!t) throw new Error(`no token at ${contract}`);
    const h = this.requireHex(address);
    t.balances.set(h, (t.balances.get(h) ?? 0n) + BigInt(amount));
  }

  /** A token balance in base units. */
  tokenBalance(contract: string, address: string): bigint {
    return this.ledger.tokens.get(this.requireHex(contract))?.balances.get(this.requireHex(address)) ?? 0n;
  }

  /** The transactions waiting for the next block (ids). */
  pendingIds(): string[] {
    return [...this.pending];
  }

  /** What `/wallet/gettransactioninfobyid` would answer (`{}` when not in a block). */
  infoOf(txId: string): Record<string, unknown> {
    return this.txs.get(txId)?.info ?? {};
  }

  /**
   * Makes the next block: its time is the node's clock (at least 3 s after its parent). Pending
   * transactions whose expiration is not after the parent's time are dropped; the others are
   * executed in order (fees burnt, TRX and tokens moved; a failing TRC-20 call is included as
   * REVERT / OUT_OF_ENERGY with its fee). `empty`: a block that takes none of them.
   */
  produceBlock(o: { empty?: boolean } = {}): TronBlockRecord {
    const parent = this.head();
    const timestamp = Math.max(this.now(), parent.timestamp + 3000);
    const included: string[] = [];
    const number = parent.number + 1;
    if (o.empty) {
      // A block whose producer did not take the pool's transactions: they stay pending.
      const block = this.makeBlock(number, timestamp, parent.blockID, []);
      this.blocks.push(block);
      return block;
    }
    for (const id of this.pending) {
      const rec = this.txs.get(id);
      if (!rec) continue;
      if (rec.tx.expiration <= parent.timestamp) {
        this.txs.delete(id);
        continue;
      }
      try {
        this.validate(rec.tx, this.ledger, rec.signedBytes);
      } catch {
        this.txs.delete(id);
        continue;
      }
      const info = this.execute(rec, this.ledger);
      rec.blockNumber = number;
      rec.info = { id, ...info, blockNumber: number, blockTimeStamp: timestamp };
      included.push(id);
    }
    this.pending = [];
    const block = this.makeBlock(number, timestamp, parent.blockID, included);
    this.blocks.push(block);
    return block;
  }

  /** The next `count` requests (to `path` if given, e.g. `/wallet/broadcasttransaction`) answer `status`. */
  failNext(count: number, status = 503, path?: string): void {
    for (let i = 0; i < count; i += 1) this.failures.push({ status, ...(path ? { path } : {}) });
  }

  /** From now on requests get no answer (until `resume`): a node that hangs. */
  stopAnswering(): void {
    this.hanging = true;
  }

  /** Answers again (the hung requests are dropped with a 503). */
  resume(): void {
    this.hanging = false;
    const r = this.releaseHung;
    this.releaseHung = [];
    for (const f of r) f();
  }

  private head(): TronBlockRecord {
    return this.blocks[this.blocks.length - 1] as TronBlockRecord;
  }

  private requireHex(a: string): string {
    const h = hexOf(a);
    if (!h) throw new Error(`not a Tron address: ${a}`);
    return h;
  }

  private makeBlock(number: number, timestamp: number, parentHash: string, txIds: string[]): TronBlockRecord {
    const digest = sha256(Buffer.from(JSON.stringify({ number, timestamp, parentHash, txIds }))).toString(
      'hex',
    );
    const blockID = number.toString(16).padStart(16, '0') + digest.slice(16);
    return { number, timestamp, blockID, parentHash, txIds };
  }

  private blockJson(b: TronBlockRecord, visible: boolean): Record<string, unknown> {
    return {
      blockID: b.blockID,
      block_header: {
        raw_data: {
          number: b.number,
          txTrieRoot: '0'.repeat(64),
          witness_address: visible ? 'TLyqzVGLV1srkB7dToTAEqgDSfPtXRJZYH' : '41' + '7'.repeat(40),
          parentHash: b.parentHash,
          version: 31,
          timestamp: b.timestamp,
        },
        witness_signature: '0'.repeat(130),
      },
      ...(b.txIds.length ? { transactions: b.txIds.map((id) => this.txs.get(id)?.tx.json) } : {}),
    };
  }

  private async handle(req: ResponderRequest): Promise<ResponderAnswer> {
    this.requests.push(req.path);
    if (this.hanging) {
      await new Promise<void>((resolve) => this.releaseHung.push(resolve));
      return { status: 503, text: 'stopped' };
    }
    const f = this.failures.findIndex((x) => x.path === undefined || x.path === req.path);
    if (f >= 0) {
      const [fail] = this.failures.splice(f, 1);
      return { status: fail!.status, text: 'Service Unavailable' };
    }
    let body: Record<string, unknown> = {};
    if (req.body.trim() !== '') {
      try {
        body = JSON.parse(req.body) as Record<string, unknown>;
      } catch (err) {
        return { status: 200, json: { Error: `class com.alibaba.fastjson.JSONException : ${String(err)}` } };
      }
    } else {
      for (const [k, v] of req.query) body[k] = v;
    }
    const visible = body.visible === true || body.visible === 'true';
    try {
      switch (req.path) {
        case '/wallet/getnowblock':
          return { status: 200, json: this.blockJson(this.head(), visible) };
        case '/wallet/getblockbynum': {
          const b = this.blocks.find((x) => x.number === Number(body.num));
          return { status: 200, json: b ? this.blockJson(b, visible) : {} };
        }
        case '/wallet/getchainparameters':
          return { status: 200, json: { chainParameter: this.chainParameters() } };
        case '/wallet/getaccount':
          return { status: 200, json: this.account(body, visible) };
        case '/wallet/getcontract': {
          const h = hexOf(body.value);
          const t = this.ledger.tokens.get(h);
          if (!t) return { status: 200, json: {} };
          return {
            status: 200,
            json: {
              origin_address: visible ? 'TLyqzVGLV1srkB7dToTAEqgDSfPtXRJZYH' : '41' + '7'.repeat(40),
              contract_address: visible ? b58(h) : h,
              bytecode: '6080',
              name: t.symbol,
              consume_user_resource_percent: 100,
            },
          };
        }
        case '/wallet/createtransaction':
          return { status: 200, json: this.createTransaction(body, visible) };
        case '/wallet/triggersmartcontract':
          return { status: 200, json: this.trigger(body, visible, false) };
        case '/wallet/triggerconstantcontract':
          return { status: 200, json: this.trigger(body, visible, true) };
        case '/wallet/broadcasttransaction':
          return { status: 200, json: this.broadcast(body) };
        case '/wallet/gettransactioninfobyid':
          return { status: 200, json: this.txs.get(String(body.value))?.info ?? {} };
        // The solidity API: what the solidified blocks hold (java-tron's /walletsolidity/…).
        case '/walletsolidity/getnowblock':
          return { status: 200, json: this.blockJson(this.blocks[this.solidNumber()]!, visible) };
        case '/walletsolidity/gettransactioninfobyid': {
          const rec = this.txs.get(String(body.value));
          const solid = rec?.blockNumber !== undefined && rec.blockNumber <= this.solidNumber();
          return { status: 200, json: solid ? (rec.info ?? {}) : {} };
        }
        case '/wallet/gettransactionbyid': {
          const rec = this.txs.get(String(body.value));
          if (!rec || rec.blockNumber === undefined) return { status: 200, json: {} };
          return {
            status: 200,
            json: { ...rec.tx.json, ret: [{ contractRet: rec.contractRet ?? 'SUCCESS' }] },
          };
        }
        case '/wallet/gettransactionfrompending': {
          const id = String(body.value);
          const rec = this.pending.includes(id) ? this.txs.get(id) : undefined;
          return { status: 200, json: rec ? rec.tx.json : {} };
        }
        default:
          return { status: 404, text: `no such API: ${req.path}` };
      }
    } catch (err) {
      if (err instanceof NodeError)
        return { status: 200, json: { Error: `class ${err.code} : ${err.message}` } };
      throw err;
    }
  }

  private chainParameters(): Array<{ key: string; value?: number }> {
    const p = (key: string, value: number): { key: string; value?: number } =>
      value ? { key, value } : { key };
    return [
      p('getMaintenanceTimeInterval', 21_600_000),
      p('getCreateAccountFee', this.fees.createAccountFee),
      p('getTransactionFee', this.fees.transactionFee),
      p('getCreateNewAccountFeeInSystemContract', this.fees.createNewAccountFeeInSystemContract),
      p('getEnergyFee', this.fees.energyFee),
      p('getMemoFee', this.fees.memoFee),
    ];
  }

  private account(body: Record<string, unknown>, visible: boolean): Record<string, unknown> {
    const h = hexOf(body.address);
    if (!h) throw new NodeError('java.lang.IllegalArgumentException', 'Invalid address provided');
    const a = this.ledger.accounts.get(h);
    if (!a) return {};
    const out: Record<string, unknown> = { address: visible ? b58(h) : h, create_time: a.createTime };
    if (a.balance > 0n) out.balance = Number(a.balance);
    const trc20: Array<Record<string, string>> = [];
    for (const [c, t] of this.ledger.tokens) {
      const v = t.balances.get(h);
      if (v) trc20.push({ [visible ? b58(c) : c]: v.toString() });
    }
    if (trc20.length) out.trc20 = trc20;
    return out;
  }

  /** The reference fields and times of a transaction built now on the head block. */
  private refFields(): Record<string, unknown> {
    const head = this.head();
    return {
      ref_block_bytes: head.blockID.slice(12, 16),
      ref_block_hash: head.blockID.slice(16, 32),
      expiration: head.timestamp + 60_000,
      timestamp: this.now(),
    };
  }

  private unsignedJson(rawData: Record<string, unknown>, visible: boolean): Record<string, unknown> {
    const pb = utils.transaction.txJsonToPb({ raw_data: rawData, visible });
    const rawHex = utils.transaction.txPbToRawDataHex(pb).toLowerCase();
    return {
      visible,
      txID: sha256(Buffer.from(rawHex, 'hex')).toString('hex'),
      raw_data: rawData,
      raw_data_hex: rawHex,
    };
  }

  private createTransaction(body: Record<string, unknown>, visible: boolean): Record<string, unknown> {
    const owner = hexOf(body.owner_address);
    const to = hexOf(body.to_address);
    const amount = Number(body.amount);
    if (!owner || !to) throw new NodeError('java.lang.IllegalArgumentException', 'Invalid address provided');
    const acct = this.ledger.accounts.get(owner);
    if (!acct) {
      throw new NodeError(
        'org.tron.core.exception.ContractValidateException',
        'Validate TransferContract error, no OwnerAccount.',
      );
    }
    if (!Number.isSafeInteger(amount) || amount <= 0) {
      throw new NodeError(
        'org.tron.core.exception.ContractValidateException',
        'Amount must be greater than 0.',
      );
    }
    if (owner === to) {
      throw new NodeError(
        'org.tron.core.exception.ContractValidateException',
        'Cannot transfer TRX to yourself.',
      );
    }
    if (acct.balance < BigInt(amount)) {
      throw new NodeError(
        'org.tron.core.exception.ContractValidateException',
        'Validate TransferContract error, balance is not sufficient.',
      );
    }
    const fmt = (h: string): string => (visible ? b58(h) : h);
    const rawData = {
      contract: [
        {
          parameter: {
            value: { amount, owner_address: fmt(owner), to_address: fmt(to) },
            type_url: 'type.googleapis.com/protocol.TransferContract',
          },
          type: 'TransferContract',
        },
      ],
      ...this.refFields(),
      ...(typeof body.extra_data === 'string' && body.extra_data ? { data: body.extra_data } : {}),
    };
    return this.unsignedJson(rawData, visible);
  }

  private callData(body: Record<string, unknown>): string {
    if (typeof body.data === 'string' && body.data) return body.data.replace(/^0x/, '').toLowerCase();
    const sel = String(body.function_selector ?? '');
    const selector = utils.ethersUtils.keccak256(Buffer.from(sel, 'utf8')).slice(2, 10);
    return selector + String(body.parameter ?? '').toLowerCase();
  }

  /** `/wallet/triggersmartcontract` (an unsigned transaction) and `/wallet/triggerconstantcontract` (a dry run). */
  private trigger(
    body: Record<string, unknown>,
    visible: boolean,
    constant: boolean,
  ): Record<string, unknown> {
    const owner = hexOf(body.owner_address);
    const contract = hexOf(body.contract_address);
    if (!contract || (!owner && !constant)) {
      throw new NodeError('java.lang.IllegalArgumentException', 'Invalid address provided');
    }
    const token = this.ledger.tokens.get(contract);
    if (!token) {
      return {
        result: { code: 'CONTRACT_VALIDATE_ERROR', message: hexMsg('Smart contract is not exist.') },
      };
    }
    const data = this.callData(body);
    const fmt = (h: string): string => (visible ? b58(h) : h);
    const rawData: Record<string, unknown> = {
      contract: [
        {
          parameter: {
            value: {
              data,
              owner_address: fmt(owner || '41' + '0'.repeat(40)),
              contract_address: fmt(contract),
            },
            type_url: 'type.googleapis.com/protocol.TriggerSmartContract',
          },
          type: 'TriggerSmartContract',
        },
      ],
      ...this.refFields(),
      ...(constant ? {} : { fee_limit: Number(body.fee_limit ?? 0) }),
    };
    const tx = this.unsignedJson(rawData, visible);
    if (!constant) return { result: { result: true }, transaction: tx };
    const run = this.runCall(token, owner, data, this.ledger, false);
    return {
      result: { result: true },
      energy_used: run.energy,
      constant_result: [run.output],
      ...(run.ok ? {} : { result: { result: true, message: hexMsg(run.message) } }),
      // java-tron: a reverted dry run's constant_result is the revert data (Error(string)).
      transaction: { ...tx, ret: [{ ret: run.ok ? 'SUCCESS' : 'FAILED' }] },
    };
  }

  /** Runs a TRC-20 call (balanceOf, decimals, symbol, transfer) on `ledger`; `commit` moves tokens. */
  private runCall(
    token: Token,
    owner: string,
    data: string,
    ledger: Ledger,
    commit: boolean,
    contract?: string,
  ): { ok: boolean; output: string; energy: number; message: string; result: string } {
    const word = (v: bigint): string => v.toString(16).padStart(64, '0');
    const sel = data.slice(0, 8);
    const t = contract ? (ledger.tokens.get(contract) as Token) : token;
    if (sel === '70a08231' && data.length === 72) {
      return {
        ok: true,
        output: word(t.balances.get(`41${data.slice(32, 72)}`) ?? 0n),
        energy: 700,
        message: '',
        result: 'SUCCESS',
      };
    }
    if (sel === '313ce567' && t.decimals !== null)
      return { ok: true, output: word(BigInt(t.decimals)), energy: 300, message: '', result: 'SUCCESS' };
    if (sel === 'a9059cbb' && data.length === 136 && /^0{24}/.test(data.slice(8, 72))) {
      const to = `41${data.slice(32, 72)}`;
      const amount = BigInt(`0x${data.slice(72)}`);
      const have = t.balances.get(owner) ?? 0n;
      const revert = (reason: string) => ({
        ok: false,
        output: revertData(reason),
        energy: this.fees.energyRevert,
        message: 'REVERT opcode executed',
        result: 'REVERT',
      });
      if (t.blacklist.has(owner)) return revert('Blacklistable: account is blacklisted');
      if (have < amount) {
        // An old-style token answers false (and moves nothing) where a modern one reverts.
        if (t.shortfall === 'false') {
          return {
            ok: true,
            output: word(0n),
            energy: this.fees.energyRevert,
            message: '',
            result: 'SUCCESS',
          };
        }
        return revert('ERC20: transfer amount exceeds balance');
      }
      const energy =
        (t.balances.get(to) ?? 0n) > 0n ? this.fees.energyTransfer : this.fees.energyTransferNewHolder;
      if (commit) {
        t.balances.set(owner, have - amount);
        t.balances.set(to, (t.balances.get(to) ?? 0n) + amount);
      }
      return { ok: true, output: word(1n), energy, message: '', result: 'SUCCESS' };
    }
    return {
      ok: false,
      output: '',
      energy: this.fees.energyRevert,
      message: 'REVERT opcode executed',
      result: 'REVERT',
    };
  }

  /** Decodes and verifies a broadcast transaction; java-tron's answer. */
  private broadcast(body: Record<string, unknown>): Record<string, unknown> {
    let txid = typeof body.txID === 'string' ? body.txID : '';
    const fail = (code: string, message: string): Record<string, unknown> => {
      this.broadcasts.push(code);
      return { code, txid, message: hexMsg(message) };
    };
    const raw = body.raw_data as Record<string, unknown> | undefined;
    if (!raw || typeof raw !== 'object' || !Array.isArray(raw.contract) || raw.contract.length !== 1) {
      this.broadcasts.push('Error');
      return { Error: 'class java.lang.NullPointerException : raw_data with one contract is required' };
    }
    // The bytes the node computes from the JSON (java-tron ignores txID and raw_data_hex).
    let rawHex: string;
    try {
      rawHex = utils.transaction
        .txPbToRawDataHex(utils.transaction.txJsonToPb({ raw_data: raw, visible: body.visible === true }))
        .toLowerCase();
    } catch (err) {
      this.broadcasts.push('Error');
      return { Error: `class org.tron.core.exception.BadItemException : ${String(err)}` };
    }
    const realId = sha256(Buffer.from(rawHex, 'hex')).toString('hex');
    if (typeof body.raw_data_hex === 'string' && body.raw_data_hex.toLowerCase() !== rawHex) {
      return fail('SIGERROR', 'Validate signature error: raw_data_hex is not the encoding of raw_data');
    }
    if (txid && txid.toLowerCase() !== realId) {
      return fail('SIGERROR', `Validate signature error: txID ${txid} is not sha256(raw_data) ${realId}`);
    }
    txid = realId;
    const pb = proto().Transaction.raw.deserializeBinary(Buffer.from(rawHex, 'hex'));
    const c = pb.getContractList()[0]!;
    let tx: VerifiedTronTx;
    const common = {
      txID: realId,
      memo: Buffer.from(pb.getData_asU8()).toString('utf8'),
      feeLimit: pb.getFeeLimit(),
      expiration: pb.getExpiration(),
      json: { ...body, txID: realId, raw_data_hex: rawHex },
    };
    const value = c.getParameter().getValue_asU8();
    if (c.getType() === 1) {
      const t = proto().TransferContract.deserializeBinary(value);
      tx = {
        ...common,
        type: 'TransferContract',
        from: b58(hx(t.getOwnerAddress_asU8())),
        to: b58(hx(t.getToAddress_asU8())),
        amount: BigInt(t.getAmount()),
        signer: '',
      };
    } else if (c.getType() === 31) {
      const t = proto().TriggerSmartContract.deserializeBinary(value);
      const data = hx(t.getData_asU8());
      if (t.getCallValue() !== 0 || t.getCallTokenValue() !== 0) {
        return fail(
          'CONTRACT_VALIDATE_ERROR',
          'Contract validate error : this node only runs TRC-20 calls without call_value',
        );
      }
      const to = /^a9059cbb0{24}/.test(data) && data.length === 136 ? `41${data.slice(32, 72)}` : '';
      tx = {
        ...common,
        type: 'TriggerSmartContract',
        from: b58(hx(t.getOwnerAddress_asU8())),
        to: to ? b58(to) : '',
        amount: to ? BigInt(`0x${data.slice(72)}`) : 0n,
        token: b58(hx(t.getContractAddress_asU8())),
        signer: '',
      };
    } else {
      return fail(
        'CONTRACT_VALIDATE_ERROR',
        `Contract validate error : contract type ${c.getType()} is not run by this node`,
      );
    }
    if (this.txs.has(realId)) return fail('DUP_TRANSACTION_ERROR', 'dup transaction');
    // Signatures: exactly the owner's (this node has no multi-signature permissions).
    const sigs = Array.isArray(body.signature) ? (body.signature as unknown[]) : [];
    if (sigs.length !== 1 || typeof sigs[0] !== 'string' || !/^(0x)?[0-9a-fA-F]{130}$/.test(sigs[0])) {
      return fail('SIGERROR', 'Validate signature error: miss sig or contract');
    }
    const sig = sigs[0].replace(/^0x/, '');
    let signerPub: string;
    let signerAddr: string;
    try {
      const digest = `0x${realId}`;
      let v = parseInt(sig.slice(128, 130), 16);
      if (v < 27) v += 27;
      const s = utils.ethersUtils.Signature.from({
        r: `0x${sig.slice(0, 64)}`,
        s: `0x${sig.slice(64, 128)}`,
        v,
      });
      signerPub = utils.ethersUtils.SigningKey.recoverPublicKey(digest, s);
      signerAddr = utils.crypto.ecRecover(realId, sig).toLowerCase();
    } catch (err) {
      return fail('SIGERROR', `Validate signature error: ${String(err)}`);
    }
    if (signerAddr !== hexOf(tx.from)) {
      return fail(
        'SIGERROR',
        `Validate signature error: ${sig} is signed by ${b58(signerAddr)} but it is not contained of permission.`,
      );
    }
    tx.signer = signerPub;
    // TaPoS: the reference block must be one this node has.
    const refBytes = hx(pb.getRefBlockBytes_asU8());
    const refHash = hx(pb.getRefBlockHash_asU8());
    const ref = this.blocks.find(
      (b) => b.blockID.slice(12, 16) === refBytes && b.blockID.slice(16, 32) === refHash,
    );
    if (!ref) {
      return fail(
        'TAPOS_ERROR',
        `Tapos check error: ref block bytes ${refBytes} hash ${refHash} is not in this chain's recent blocks`,
      );
    }
    const headTime = this.head().timestamp;
    if (tx.expiration <= headTime || tx.expiration > headTime + 86_400_000) {
      return fail(
        'TRANSACTION_EXPIRATION_ERROR',
        `Transaction expiration, transaction expiration time is ${tx.expiration}, but the head block time is ${headTime}`,
      );
    }
    if (common.memo.length > 0 && pb.getData_asU8().length > 512) {
      return fail('CONTRACT_VALIDATE_ERROR', 'Contract validate error : data size is too large');
    }
    // Validate against the state with the pending transactions applied.
    const view = this.pendingView();
    const signedBytes = rawHex.length / 2 + 3 + 2 + 65;
    try {
      this.validate(tx, view, signedBytes);
    } catch (err) {
      if (err instanceof NodeError) return fail(err.code, err.message);
      throw err;
    }
    this.txs.set(realId, { tx, rawHex, signedBytes });
    this.pending.push(realId);
    this.verified.push(tx);
    this.broadcasts.push('SUCCESS');
    return { result: true, txid: realId };
  }

  /** A copy of the ledger with every pending transaction executed. */
  private pendingView(): Ledger {
    const view: Ledger = {
      accounts: new Map([...this.ledger.accounts].map(([k, v]) => [k, { ...v }])),
      tokens: new Map([...this.ledger.tokens].map(([k, t]) => [k, { ...t, balances: new Map(t.balances) }])),
    };
    for (const id of this.pending) {
      const rec = this.txs.get(id);
      if (rec) this.execute(rec, view, true);
    }
    return view;
  }

  /** The fee in sun of a transaction's bandwidth, account creation and memo. */
  private baseFee(tx: VerifiedTronTx, ledger: Ledger, signedBytes: number): { net: number; extra: number } {
    const net = (signedBytes + 64) * this.fees.transactionFee;
    let extra = tx.memo.length > 0 ? this.fees.memoFee : 0;
    if (tx.type === 'TransferContract' && !ledger.accounts.has(hexOf(tx.to))) {
      extra += this.fees.createAccountFee + this.fees.createNewAccountFeeInSystemContract;
    }
    return { net, extra };
  }

  /** java-tron's contract validation: throws NodeError with its code and message. */
  private validate(tx: VerifiedTronTx, ledger: Ledger, signedBytes: number): void {
    const owner = ledger.accounts.get(hexOf(tx.from));
    const invalid = (m: string): NodeError =>
      new NodeError('CONTRACT_VALIDATE_ERROR', `Contract validate error : ${m}`);
    const { net, extra } = this.baseFee(tx, ledger, signedBytes);
    if (tx.type === 'TransferContract') {
      if (!owner) throw invalid('Validate TransferContract error, no OwnerAccount.');
      if (tx.amount <= 0n) throw invalid('Amount must be greater than 0.');
      if (tx.from === tx.to) throw invalid('Cannot transfer TRX to yourself.');
      if (owner.balance < tx.amount + BigInt(extra)) {
        throw invalid('Validate TransferContract error, balance is not sufficient.');
      }
      if (owner.balance < tx.amount + BigInt(extra + net)) {
        throw new NodeError('BANDWITH_ERROR', 'Account resource insufficient error.');
      }
      return;
    }
    if (!owner) throw invalid(`Validate TriggerSmartContract error, no OwnerAccount.`);
    if (!ledger.tokens.has(hexOf(tx.token))) throw invalid('No contract or not a valid smart contract');
    if (tx.feeLimit < 0 || tx.feeLimit > 15_000_000_000)
      throw invalid('feeLimit must be >= 0 and <= 15000000000');
    if (owner.balance < BigInt(net + extra))
      throw new NodeError('BANDWITH_ERROR', 'Account resource insufficient error.');
  }

  /** Executes an accepted transaction on `ledger`: fees burnt, value moved; the info the node keeps. */
  private execute(rec: TxRecord, ledger: Ledger, dry = false): Record<string, unknown> {
    const tx = rec.tx;
    const owner = ledger.accounts.get(hexOf(tx.from))!;
    const { net, extra } = this.baseFee(tx, ledger, rec.signedBytes);
    if (tx.type === 'TransferContract') {
      const to = hexOf(tx.to);
      const fee = net + extra;
      owner.balance -= tx.amount + BigInt(fee);
      const dest = ledger.accounts.get(to) ?? { balance: 0n, createTime: this.now() };
      dest.balance += tx.amount;
      ledger.accounts.set(to, dest);
      if (!dry) rec.contractRet = 'SUCCESS';
      return { fee, contractResult: [''], receipt: { net_fee: net } };
    }
    const contract = hexOf(tx.token);
    const token = ledger.tokens.get(contract)!;
    const data = (tx.json.raw_data as { contract: Array<{ parameter: { value: { data?: string } } }> })
      .contract[0]!.parameter.value.data;
    const callData = String(data ?? '').toLowerCase();
    // Energy is paid from the balance up to the fee limit: beyond it the call runs out of energy.
    const maxEnergy = Math.floor(
      Math.min(tx.feeLimit, Number(owner.balance) - net - extra) / this.fees.energyFee,
    );
    const probe = this.runCall(token, hexOf(tx.from), callData, ledger, false, contract);
    let result = probe.result;
    let energy = probe.energy;
    if (probe.ok && energy > maxEnergy) {
      result = 'OUT_OF_ENERGY';
      energy = Math.max(0, maxEnergy);
    } else if (probe.ok) {
      this.runCall(token, hexOf(tx.from), callData, ledger, true, contract);
    }
    const energyFee = energy * this.fees.energyFee;
    const fee = net + extra + energyFee;
    owner.balance -= BigInt(fee);
    if (!dry) rec.contractRet = result;
    return {
      fee,
      // The call's return data: its result word, or a revert's Error(string); none when out of energy.
      contractResult: [result === 'OUT_OF_ENERGY' ? '' : probe.output],
      contract_address: contract,
      receipt: { energy_fee: energyFee, energy_usage_total: energy, net_fee: net, result },
      ...(result === 'SUCCESS'
        ? {}
        : {
            result: 'FAILED',
            resMessage: hexMsg(result === 'OUT_OF_ENERGY' ? 'Not enough energy' : probe.message),
          }),
    };
  }
}
