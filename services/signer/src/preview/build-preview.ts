import { Interface, dataLength, keccak256 } from 'ethers';
import { decodeCall, hasErc721Reading } from './abi-registry.js';
import { PREVIEW_TEXT_MAX, boundText } from './bound-text.js';
import {
  amountCandidates,
  amountFlag,
  balanceChanges,
  capBalanceChanges,
  decodeRevert,
  majorUnits,
  recipientFlag,
  tokenTransferOf,
  unlimitedFlag,
  valueAndCallFlag,
  type BalanceChange,
} from './preview-fns.js';
import {
  TraceUnsupportedError,
  type ChainTokenTransferJson,
  type DecodedCall,
  type EvmCall,
  type PreviewFlag,
  type PreviewInput,
  type PreviewRpc,
  type TokenTransferJson,
} from './preview-types.js';

/**
 * What the approver of an `agent_transaction` sees: a preview the server computes from the held
 * transaction itself (never from the agent's words alone), as snake_case JSON:
 *
 * `{chain, chain_id, from, to, value_wei, value, symbol, call, token_transfer, simulation, rule,
 * risk_tier, summary, flags}`.
 *
 * - `call`: null without call data; else `{selector, name, signature, args, contract}` decoded
 *   with ethers `Interface` from the known ABIs (ERC-20 transfer/approve/transferFrom/
 *   increaseAllowance, ERC-721 transferFrom/safeTransferFrom ×2/approve/setApprovalForAll, ERC-1155
 *   safeTransferFrom, WETH deposit/withdraw) and those added with `registerAbi`; an unknown selector
 *   is `{selector, name: null, signature: null, args: {}}`. `transferFrom` and `approve` have the
 *   same selector in ERC-20 and ERC-721: the contract's ERC-165 `supportsInterface(0x80ac58cd)`
 *   (an eth_call) decides; without an answer the ERC-20 reading stands.
 * - `token_transfer`: the token movement or permission of a known token call (`kind`), the
 *   recipient (spender / operator for approvals), `amount_raw`, and `decimals`/`amount` when the
 *   contract answers `decimals()`.
 * - `simulation`: eth_call (from, to, value, data) at latest → `ok`, `return_data`, `revert_reason`
 *   (Error(string), Panic, registered custom errors); balance changes from `debug_traceCall` with
 *   the prestateTracer in diffMode when the node has it (`trace: "debug_traceCall"`), else `trace:
 *   "unsupported"` and `balance_changes: null`; at most 100 balance changes (the sender's, then the
 *   largest |delta|; `balance_changes_left_out` counts the rest). Every chain call is bounded by `timeoutMs`; a
 *   failure gives `{ok: false, error}` and never blocks the preview.
 *
 * Flags (`{code, detail}`):
 * - `unlimited_approval`: ERC-20 approve/increaseAllowance of an amount ≥ 2^255 (MaxUint256 and
 *   the usual near-max values), or setApprovalForAll(operator, true).
 * - `summary_recipient_mismatch`: the summary (title, body, field values) names an EVM address
 *   (0x + 40 hex, case-insensitive, not inside a longer hex run) that is none of: the effective
 *   recipient (the decoded recipient/spender/operator, else `to`), the contract `to`, the sender
 *   `from`, the owner a transferFrom moves tokens from.
 * - `summary_amount_mismatch` (best-effort): a summary field whose label contains "amount" or
 *   "value" holds decimal numbers (commas/underscores as thousands separators; hex removed first)
 *   none of which equals the native value in major units, the token amount raw, raw / 10^6,
 *   raw / 10^18, raw / 10^decimals() when known, or the token id of an NFT call. A field without a
 *   number is not checked, and nothing is checked for an unknown call sending no value (its amounts
 *   are inside call data no ABI here reads).
 * - `simulation_reverted`: eth_call reverted (the reason is in `simulation.revert_reason`).
 * - `value_and_call`: native value is sent along a known token call (WETH deposit excepted).
 *
 * Non-EVM chains (family ≠ evm): `call` and `simulation` are null, `value` is in major units from
 * the chain's decimals (0 for a token transfer), `token_transfer` is null for a native transfer and
 * `{token, recipient, amount_raw, decimals?, amount?}` for a token one (SPL, TRC-20: `input.token`), and the only flag is the recipient check, against the
 * literal `to` and `from` only (EVM-shaped addresses: other address shapes are out of scope).
 */
export async function buildPreview(
  input: PreviewInput,
  rpc?: PreviewRpc,
  opts: { timeoutMs?: number } = {},
): Promise<Record<string, unknown>> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const evm = input.chain.family === 'evm';
  const decimals = input.chain.decimals ?? (evm ? 18 : 0);
  const head = {
    chain: input.chain.name,
    chain_id: String(input.chain.chainId),
    from: input.from,
    to: input.to,
    value_wei: input.valueWei.toString(),
    value: majorUnits(input.valueWei, decimals),
    symbol: input.chain.nativeSymbol ?? null,
  };
  const tail = { rule: input.rule ?? null, risk_tier: input.tier, summary: input.summary ?? null };
  if (!evm) {
    const flags: PreviewFlag[] = [];
    const f = recipientFlag(input.summary, [input.to, input.from]);
    if (f) flags.push(f);
    return { ...head, call: null, token_transfer: chainTokenOf(input), simulation: null, ...tail, flags };
  }

  const data = input.data || '0x';
  const tx: EvmCall = { from: input.from, to: input.to, value: input.valueWei, data };
  let call = decodeCall(data);
  const probes: Promise<TokenProbe> = rpc ? probeToken(call, rpc, input, timeoutMs) : Promise.resolve({});
  const [probe, simulation] = await Promise.all([probes, rpc ? simulate(tx, rpc, timeoutMs) : null]);
  if (probe.erc721) call = decodeCall(data, { standard: 'erc721' });
  const token = tokenTransferOf(call, input.to, input.from, input.valueWei);
  if (token && probe.decimals !== undefined && token.kind.startsWith('erc20_') && token.amount_raw !== null) {
    token.decimals = probe.decimals;
    token.amount = majorUnits(BigInt(token.amount_raw), probe.decimals);
  }

  const flags = flagsOf(input, call, token, simulation, decimals);
  let simulationJson: Omit<Simulation, 'reverted'> | null = null;
  if (simulation) {
    const { reverted: _reverted, ...rest } = simulation;
    simulationJson = rest;
  }
  return {
    ...head,
    call: call ? callJson(call, input.to) : null,
    token_transfer: token,
    simulation: simulationJson,
    ...tail,
    flags,
  };
}

/** A non-EVM token transfer (SPL, TRC-20, ...) as the approver sees it; null for a native one. */
function chainTokenOf(input: PreviewInput): ChainTokenTransferJson | null {
  const t = input.token;
  if (!t) return null;
  const out: ChainTokenTransferJson = {
    token: t.mint,
    recipient: input.to,
    amount_raw: t.amountRaw === undefined ? null : t.amountRaw.toString(),
  };
  if (t.decimals !== undefined) {
    out.decimals = t.decimals;
    if (t.amountRaw !== undefined) out.amount = majorUnits(t.amountRaw, t.decimals);
  }
  return out;
}

/** Each chain call's bound when the caller gives none. */
export const DEFAULT_TIMEOUT_MS = 5000;

function callJson(c: DecodedCall, to: string): Record<string, unknown> {
  const out: Record<string, unknown> = {
    selector: c.selector,
    name: c.name,
    signature: c.signature,
    args: c.args,
    contract: to,
  };
  if (c.decodeError) out.decode_error = c.decodeError;
  return out;
}

function flagsOf(
  input: PreviewInput,
  call: DecodedCall | undefined,
  token: TokenTransferJson | null,
  simulation: Simulation | null,
  decimals: number,
): PreviewFlag[] {
  const flags: PreviewFlag[] = [];
  const push = (f: PreviewFlag | undefined) => {
    if (f) flags.push(f);
  };
  push(unlimitedFlag(token));
  push(
    recipientFlag(input.summary, [token?.recipient ?? input.to, input.to, input.from, token?.owner ?? '']),
  );
  const unknownCallWithoutValue = call !== undefined && !token && input.valueWei === 0n;
  if (!unknownCallWithoutValue)
    push(amountFlag(input.summary, amountCandidates(input.valueWei, decimals, token)));
  if (simulation?.reverted) {
    push({
      code: 'simulation_reverted',
      detail: `the simulated call reverts: ${String(simulation.revert_reason ?? 'no reason given')}`,
    });
  }
  push(valueAndCallFlag(input.valueWei, token));
  return flags;
}

interface Simulation {
  ok: boolean;
  revert_reason?: string;
  return_data?: string;
  return_data_truncated?: boolean;
  return_data_bytes?: number;
  return_data_keccak256?: string;
  error?: string;
  balance_changes: BalanceChange[] | null;
  /** How many balance changes were left out (past BALANCE_CHANGES_MAX: the smallest |delta|). */
  balance_changes_left_out?: number;
  trace: 'debug_traceCall' | 'unsupported';
  trace_error?: string;
  /** Not serialised: whether ok is false because the call reverted. */
  reverted?: boolean;
}

/** A chain call bounded by `ms`, whatever the transport does. */
export async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function message(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).replace(/https?:\/\/\S+/g, '<url>').slice(0, 300);
}

async function simulate(tx: EvmCall, rpc: PreviewRpc, timeoutMs: number): Promise<Simulation> {
  const [called, traced] = await Promise.allSettled([
    withTimeout(rpc.call(tx), timeoutMs, 'eth_call'),
    rpc.traceCall ? withTimeout(rpc.traceCall(tx), timeoutMs, 'debug_traceCall') : Promise.resolve(undefined),
  ]);
  const sim: Simulation = { ok: false, balance_changes: null, trace: 'unsupported' };
  if (traced.status === 'fulfilled' && traced.value) {
    sim.trace = 'debug_traceCall';
    const { kept, leftOut } = capBalanceChanges(balanceChanges(traced.value, tx.from), tx.from);
    sim.balance_changes = kept;
    if (leftOut > 0) sim.balance_changes_left_out = leftOut;
  } else if (traced.status === 'rejected' && !(traced.reason instanceof TraceUnsupportedError)) {
    sim.trace = 'debug_traceCall';
    sim.trace_error = message(traced.reason);
  }
  if (called.status === 'rejected') {
    sim.error = message(called.reason);
    return sim;
  }
  const r = called.value;
  if (r.ok) {
    sim.ok = true;
  } else {
    sim.reverted = true;
    const reason = decodeRevert(r.data) ?? r.reason;
    if (reason !== undefined) sim.revert_reason = boundText(reason);
  }
  returnData(sim, r.data);
  return sim;
}

/**
 * The simulation's return data: as is up to PREVIEW_TEXT_MAX bytes; longer, left out and named by
 * its size and keccak-256 (a contract may return any amount: the preview must stay small).
 */
function returnData(sim: Simulation, data: string): void {
  if (!/^0x([0-9a-fA-F]{2})*$/.test(data) || (data.length - 2) / 2 <= PREVIEW_TEXT_MAX) {
    sim.return_data = data.length > 2 * PREVIEW_TEXT_MAX + 2 ? boundText(data) : data;
    return;
  }
  sim.return_data_truncated = true;
  sim.return_data_bytes = (data.length - 2) / 2;
  sim.return_data_keccak256 = keccak256(data);
}

const PROBE_IFACE = new Interface([
  'function supportsInterface(bytes4 interfaceId) view returns (bool)',
  'function decimals() view returns (uint8)',
]);
const ERC721_INTERFACE_ID = '0x80ac58cd';

/** What the token contract answered of itself. */
interface TokenProbe {
  erc721?: boolean;
  decimals?: number;
}

/**
 * What the token contract says of itself: ERC-165 ERC-721 support (only asked for a selector
 * ERC-20 and ERC-721 share) and decimals() (for ERC-20 calls). Unanswered probes are left out.
 */
async function probeToken(
  call: DecodedCall | undefined,
  rpc: PreviewRpc,
  input: PreviewInput,
  timeoutMs: number,
): Promise<TokenProbe> {
  if (!call?.kind?.startsWith('erc20_') || !call.selector) return {};
  const ask = async (fn: 'supportsInterface' | 'decimals', args: unknown[]): Promise<bigint | undefined> => {
    try {
      const r = await withTimeout(
        rpc.call({
          from: input.from,
          to: input.to,
          value: 0n,
          data: PROBE_IFACE.encodeFunctionData(fn, args),
        }),
        timeoutMs,
        fn,
      );
      if (!r.ok || dataLength(r.data) !== 32) return undefined;
      return BigInt(r.data);
    } catch {
      return undefined;
    }
  };
  const [iface, dec] = await Promise.all([
    hasErc721Reading(call.selector) ? ask('supportsInterface', [ERC721_INTERFACE_ID]) : undefined,
    ask('decimals', []),
  ]);
  const out: TokenProbe = {};
  if (iface === 1n) out.erc721 = true;
  if (!out.erc721 && dec !== undefined && dec <= 77n) out.decimals = Number(dec);
  return out;
}
