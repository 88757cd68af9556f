import { ChainRpcError, type ChainEndpoint } from '../../keys/chain-adapter.js';
import { chainJson } from '../http.js';

/**
 * rippled's JSON-RPC (not JSON-RPC 2.0): POST `{"method": "...", "params": [{...}]}` to the
 * server's URL; the answer is `{"result": {..., "status": "success" | "error", "error": "..."}}`,
 * HTTP 200 either way.
 */

/** The members every rippled answer may carry. */
export interface RippledResult {
  status?: string;
  error?: string;
  error_code?: number;
  error_message?: string;
  error_exception?: string;
}

/**
 * rippled errors that say the server cannot answer now (not synced, overloaded, amendment
 * blocked …): the request may succeed later or on another server, nothing was refused.
 */
const TRANSIENT_ERRORS = new Set([
  'noNetwork',
  'noCurrent',
  'noClosed',
  'notSynced',
  'notReady',
  'tooBusy',
  'slowDown',
  'amendmentBlocked',
  'internal',
  'failedToForward',
  'lgrNotFound',
]);

/** True when a rippled error only says "not now". */
export function isTransientRippledError(error: string): boolean {
  return TRANSIENT_ERRORS.has(error);
}

function short(s: string): string {
  const t = s.replace(/\s+/g, ' ').trim();
  return t.length > 200 ? `${t.slice(0, 200)}…` : t;
}

/** The error of a rippled answer as a message (its name, code and message; never the request). */
export function rippledErrorText(method: string, r: RippledResult): string {
  const words = r.error_exception ?? r.error_message ?? '';
  return `${method}: ${r.error ?? 'error'}${r.error_code === undefined ? '' : ` (${r.error_code})`}${words ? `: ${short(words)}` : ''}`;
}

/** One rippled call; the result as the node gave it (`status: "error"` included). */
export async function rippled<T>(
  ep: ChainEndpoint,
  method: string,
  params: Record<string, unknown>,
): Promise<T & RippledResult> {
  const body = await chainJson<{ result?: T & RippledResult }>(ep, {
    method: 'POST',
    path: '',
    body: JSON.stringify({ method, params: [params] }),
  });
  if (!body || typeof body !== 'object' || !body.result || typeof body.result !== 'object') {
    throw new ChainRpcError(`${method}: the ${ep.chain.name} node's answer has no result`);
  }
  return body.result;
}

/**
 * A rippled call that must succeed: an error answer is a ChainRpcError, not `rejected` (these are
 * reads, nothing of ours was refused).
 */
export async function rippledOk<T>(
  ep: ChainEndpoint,
  method: string,
  params: Record<string, unknown>,
): Promise<T> {
  const r = await rippled<T>(ep, method, params);
  if (r.status === 'error' || r.error !== undefined) {
    throw new ChainRpcError(`the ${ep.chain.name} node could not answer ${rippledErrorText(method, r)}`);
  }
  return r;
}

/** An AccountRoot as `account_info` gives it. */
export interface AccountData {
  Account: string;
  Balance: string;
  Sequence: number;
  Flags: number;
  OwnerCount: number;
}

/**
 * `account_info` of the current (open) ledger, or of the last validated one with `ledger:
 * 'validated'`; undefined when the account does not exist there (actNotFound).
 */
export async function accountInfo(
  ep: ChainEndpoint,
  account: string,
  ledger: 'current' | 'validated' = 'current',
): Promise<AccountData | undefined> {
  const r = await rippled<{ account_data?: AccountData }>(ep, 'account_info', {
    account,
    ledger_index: ledger,
    strict: true,
  });
  if (r.error === 'actNotFound') return undefined;
  if (r.status === 'error' || r.error !== undefined || !r.account_data) {
    throw new ChainRpcError(
      `the ${ep.chain.name} node could not answer ${rippledErrorText('account_info', r)}`,
    );
  }
  const a = r.account_data;
  if (typeof a.Balance !== 'string' || !/^\d+$/.test(a.Balance) || !Number.isInteger(a.Sequence)) {
    throw new ChainRpcError(`account_info: the ${ep.chain.name} node's AccountRoot is malformed`);
  }
  return a;
}

/** An integer drops amount of a node's answer (a string or number of drops). */
export function dropsOf(v: unknown, what: string): bigint {
  if (typeof v === 'string' && /^\d{1,20}$/.test(v)) return BigInt(v);
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return BigInt(v);
  throw new ChainRpcError(`the node's ${what} is not an amount of drops`);
}

/** An XRP amount as server_info writes it (a JSON number of XRP, e.g. 0.2) in drops, exactly. */
export function xrpNumberToDrops(v: unknown, what: string): bigint {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) {
    throw new ChainRpcError(`the node's ${what} is not an XRP amount`);
  }
  // Servers report reserves with at most 6 decimals: toFixed(6) gives the exact drops.
  const m = /^(\d+)\.(\d{6})$/.exec(v.toFixed(6));
  if (!m) throw new ChainRpcError(`the node's ${what} is not an XRP amount`);
  return BigInt(m[1] ?? '0') * 1_000_000n + BigInt(m[2] ?? '0');
}

/** The fee, reserve and network facts `prepare` reads. */
export interface LedgerFacts {
  /** The open ledger's index (LastLedgerSequence counts from it). */
  currentLedger: number;
  validatedLedger: number;
  baseFee: bigint;
  openLedgerFee: bigint;
  reserveBase: bigint;
  reserveInc: bigint;
  /** The server's NetworkID (absent on servers before 1.11). */
  networkId?: number;
}

/** `server_info` (reserves, network id), `fee` and `ledger_current`, read together. */
export async function ledgerFacts(ep: ChainEndpoint): Promise<LedgerFacts> {
  const [info, fee, current] = await Promise.all([
    rippledOk<{
      info?: {
        network_id?: number;
        validated_ledger?: { reserve_base_xrp?: number; reserve_inc_xrp?: number; seq?: number };
      };
    }>(ep, 'server_info', {}),
    rippledOk<{ drops?: { base_fee?: string; open_ledger_fee?: string; minimum_fee?: string } }>(
      ep,
      'fee',
      {},
    ),
    rippledOk<{ ledger_current_index?: number }>(ep, 'ledger_current', {}),
  ]);
  const vl = info.info?.validated_ledger;
  if (!vl || !Number.isInteger(vl.seq)) {
    throw new ChainRpcError(`the ${ep.chain.name} node has no validated ledger yet (server_info)`);
  }
  if (!fee.drops) throw new ChainRpcError(`fee: the ${ep.chain.name} node's answer has no drops`);
  if (!Number.isInteger(current.ledger_current_index)) {
    throw new ChainRpcError(`ledger_current: the ${ep.chain.name} node's answer has no ledger_current_index`);
  }
  const baseFee = dropsOf(fee.drops.base_fee, 'base fee');
  const minimumFee =
    fee.drops.minimum_fee === undefined ? baseFee : dropsOf(fee.drops.minimum_fee, 'minimum fee');
  const openLedgerFee = dropsOf(fee.drops.open_ledger_fee, 'open ledger fee');
  const networkId = info.info?.network_id;
  return {
    currentLedger: current.ledger_current_index as number,
    validatedLedger: vl.seq as number,
    baseFee: baseFee > minimumFee ? baseFee : minimumFee,
    openLedgerFee,
    reserveBase: xrpNumberToDrops(vl.reserve_base_xrp, 'base reserve'),
    reserveInc: xrpNumberToDrops(vl.reserve_inc_xrp, 'owner reserve'),
    ...(Number.isInteger(networkId) ? { networkId: networkId as number } : {}),
  };
}

/** The last validated ledger's index (`ledger` with `ledger_index: "validated"`). */
export async function validatedLedgerIndex(ep: ChainEndpoint): Promise<number> {
  const r = await rippledOk<{ ledger_index?: number | string; ledger?: { ledger_index?: number | string } }>(
    ep,
    'ledger',
    { ledger_index: 'validated' },
  );
  const v = Number(r.ledger_index ?? r.ledger?.ledger_index);
  if (!Number.isInteger(v) || v <= 0) {
    throw new ChainRpcError(`ledger: the ${ep.chain.name} node's answer has no validated ledger index`);
  }
  return v;
}
