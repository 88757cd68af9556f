import { InvalidArgumentError } from '@custos/service-kit';
import {
  type Payment,
  Wallet,
  convertStringToHex,
  decode,
  encode,
  hashes,
  isValidClassicAddress,
  isValidXAddress,
  xAddressToClassicAddress,
} from 'xrpl';
import {
  ChainRpcError,
  type ChainEndpoint,
  type PrepareContext,
  type PreparedTransfer,
  type SignedTransfer,
  type TransferInput,
  type TransferOps,
  type TransferStatus,
  insufficientFunds,
  parseTransferAmount,
} from '../../keys/chain-adapter.js';
import type { ChainRecord } from '../../chains/chain-types.js';
import { deriveXrpKey, xrpNetworkOf } from './xrp-keys.js';
import {
  accountInfo,
  isTransientRippledError,
  ledgerFacts,
  rippled,
  rippledErrorText,
  type RippledResult,
  validatedLedgerIndex,
} from './xrp-node.js';

/** XRP has 6 decimals: 1 XRP = 1,000,000 drops. */
export const XRP_DECIMALS = 6;
/** At most 100 billion XRP exist; rippled refuses a larger amount (temBAD_AMOUNT). */
const MAX_DROPS = 100_000_000_000_000_000n;
/** LastLedgerSequence = the open ledger + this many ledgers (about a minute at 3-4 s a ledger). */
export const LEDGER_WINDOW = 20;
/**
 * The most one transfer pays in fees, in drops (0.01 XRP, a thousand times the reference cost of
 * 10 drops): the open-ledger fee is paid up to this; above it the transaction is signed with the
 * cap and rippled queues it (terQUEUED) until the fee level falls, or drops it at its
 * LastLedgerSequence.
 */
export const MAX_FEE_DROPS = 10_000n;
/** rippled's limit on a transaction's Memos field, serialised (isMemoOkay). */
const MAX_MEMOS_BYTES = 1024;
/** lsfRequireDestTag on the destination's AccountRoot. */
const LSF_REQUIRE_DEST_TAG = 0x00020000;
/** Networks whose NetworkID is above this need the NetworkID field in every transaction. */
const NETWORK_ID_REQUIRED_ABOVE = 1024;

/** What `sign` signs: every field of the Payment but Sequence (allocated by signer) and signature. */
export interface XrpUnsigned {
  account: string;
  destination: string;
  /** Drops, decimal string. */
  amount: string;
  /** Drops, decimal string. */
  fee: string;
  lastLedgerSequence: number;
  destinationTag?: number;
  /** MemoData: hex of the memo's UTF-8. */
  memoHex?: string;
  networkId?: number;
}

function memosOf(memoHex: string | undefined): Payment['Memos'] {
  return memoHex === undefined ? undefined : [{ Memo: { MemoData: memoHex } }];
}

/** The memo's size as rippled counts it (the serialised Memos array without its own markers). */
function memosSize(memoHex: string): number {
  return encode({ Memos: memosOf(memoHex) } as never).length / 2 - 2;
}

const UNSUPPORTED: [keyof TransferInput, string, string][] = [
  ['feeRateSatPerVbyte', 'fee_rate_sat_per_vbyte', 'is a Bitcoin field; XRP Ledger fees are set by signer'],
  ['feeLimitSun', 'fee_limit_sun', 'is a Tron field; XRP Ledger fees are set by signer'],
  ['tokenMint', 'token_mint', 'issued currencies (IOUs) on the XRP Ledger are not supported yet'],
  ['tokenDecimals', 'token_decimals', 'issued currencies (IOUs) on the XRP Ledger are not supported yet'],
  ['ttl', 'ttl', 'is not supported on the XRP Ledger (signer sets LastLedgerSequence)'],
];

/**
 * Checks an XRP transfer: `to` a classic address (checksum) or an X-address of the chain's network
 * (its tag becomes the destination tag), `value` in drops or XRP, `destination_tag` 0..2^32-1,
 * `memo` within rippled's 1 KiB limit; fields of other chains are refused naming them.
 */
export function parseXrpTransfer(input: TransferInput, chain: ChainRecord): TransferInput {
  if (input.data !== undefined && input.data !== '' && input.data !== '0x') {
    throw new InvalidArgumentError('data', 'is EVM calldata; an XRP Ledger payment carries none');
  }
  for (const [k, field, why] of UNSUPPORTED) {
    if (input[k] !== undefined) throw new InvalidArgumentError(field, why);
  }
  let to = input.to;
  let destinationTag = input.destinationTag;
  if (
    destinationTag !== undefined &&
    (!Number.isInteger(destinationTag) || destinationTag < 0 || destinationTag > 0xffffffff)
  ) {
    throw new InvalidArgumentError('destination_tag', 'must be an integer from 0 to 4294967295');
  }
  if (typeof to !== 'string' || to === '') throw new InvalidArgumentError('to', 'is required');
  if (!isValidClassicAddress(to)) {
    if (!isValidXAddress(to)) {
      throw new InvalidArgumentError(
        'to',
        'is not a valid XRP Ledger address (a classic r… address or an X-address)',
      );
    }
    const x = xAddressToClassicAddress(to);
    const testNetwork = xrpNetworkOf(chain) !== 'mainnet';
    if (x.test !== testNetwork) {
      throw new InvalidArgumentError(
        'to',
        `is an X-address of the XRP Ledger ${x.test ? 'test networks' : 'mainnet'}, not of ${chain.name}`,
      );
    }
    if (x.tag !== false) {
      if (destinationTag !== undefined && destinationTag !== x.tag) {
        throw new InvalidArgumentError('destination_tag', "differs from the tag the X-address 'to' carries");
      }
      destinationTag = x.tag;
    }
    to = x.classicAddress;
  }
  const value = parseTransferAmount(input.value, XRP_DECIMALS);
  if (value > MAX_DROPS)
    throw new InvalidArgumentError('value', 'is more than the 100 billion XRP that exist');
  let memo = input.memo;
  if (memo === '') memo = undefined;
  if (memo !== undefined) {
    if (typeof memo !== 'string') throw new InvalidArgumentError('memo', 'must be a string');
    if (
      Buffer.byteLength(memo, 'utf8') > MAX_MEMOS_BYTES ||
      memosSize(convertStringToHex(memo)) > MAX_MEMOS_BYTES
    ) {
      throw new InvalidArgumentError(
        'memo',
        'is longer than the XRP Ledger allows (1 KiB serialised, about 1019 bytes of UTF-8)',
      );
    }
  }
  return {
    to,
    value: input.value,
    ...(memo === undefined ? {} : { memo }),
    ...(destinationTag === undefined ? {} : { destinationTag }),
  };
}

function xrpText(drops: bigint): string {
  const whole = drops / 1_000_000n;
  const frac = (drops % 1_000_000n).toString().padStart(6, '0').replace(/0+$/, '');
  return frac ? `${whole}.${frac} XRP` : `${whole} XRP`;
}

/** Reads the chain and builds an XRP Payment (Sequence left to signer's allocation). */
export async function prepareXrpTransfer(
  ctx: PrepareContext,
  raw: TransferInput,
): Promise<PreparedTransfer<XrpUnsigned>> {
  const ep = ctx.endpoint;
  const input = parseXrpTransfer(raw, ep.chain);
  const value = parseTransferAmount(input.value, XRP_DECIMALS);
  const from = ctx.from;
  if (input.to === from) throw new InvalidArgumentError('to', 'is the sending account itself');
  const [src, dst, facts] = await Promise.all([
    accountInfo(ep, from),
    accountInfo(ep, input.to),
    ledgerFacts(ep),
  ]);
  if (!src) {
    throw insufficientFunds(
      `the account ${from} does not exist on ${ep.chain.name} yet: fund it with at least the base reserve (${xrpText(facts.reserveBase)})`,
    );
  }
  let fee = facts.openLedgerFee > facts.baseFee ? facts.openLedgerFee : facts.baseFee;
  const capped = fee > MAX_FEE_DROPS;
  if (capped) fee = MAX_FEE_DROPS > facts.baseFee ? MAX_FEE_DROPS : facts.baseFee;
  const balance = BigInt(src.Balance);
  const reserve = facts.reserveBase + BigInt(src.OwnerCount ?? 0) * facts.reserveInc;
  if (balance < value + fee + reserve) {
    const spendable = balance > reserve + fee ? balance - reserve - fee : 0n;
    throw insufficientFunds(
      `${from} holds ${xrpText(balance)}; ${xrpText(reserve)} of it is the reserve the ledger keeps and the fee is ${fee} drops, so at most ${xrpText(spendable)} can be sent`,
    );
  }
  if (!dst) {
    if (value < facts.reserveBase) {
      throw new InvalidArgumentError(
        'value',
        `the destination ${input.to} does not exist yet; a payment that creates it must be at least the base reserve (${xrpText(facts.reserveBase)})`,
      );
    }
  } else if ((dst.Flags & LSF_REQUIRE_DEST_TAG) !== 0 && input.destinationTag === undefined) {
    throw new InvalidArgumentError(
      'destination_tag',
      `is required: the destination ${input.to} accepts only tagged payments`,
    );
  }
  const lastLedgerSequence = facts.currentLedger + LEDGER_WINDOW;
  const memoHex = input.memo === undefined ? undefined : convertStringToHex(input.memo);
  const networkId =
    facts.networkId !== undefined && facts.networkId > NETWORK_ID_REQUIRED_ABOVE
      ? facts.networkId
      : undefined;
  const unsigned: XrpUnsigned = {
    account: from,
    destination: input.to,
    amount: value.toString(),
    fee: fee.toString(),
    lastLedgerSequence,
    ...(input.destinationTag === undefined ? {} : { destinationTag: input.destinationTag }),
    ...(memoHex === undefined ? {} : { memoHex }),
    ...(networkId === undefined ? {} : { networkId }),
  };
  const details: Record<string, string | number | boolean> = {
    fee_drops: fee.toString(),
    last_ledger_sequence: lastLedgerSequence,
    destination_exists: dst !== undefined,
  };
  if (capped) details.fee_capped = true;
  if (input.destinationTag !== undefined) details.destination_tag = input.destinationTag;
  if (input.memo !== undefined) details.memo = input.memo;
  return {
    unsigned,
    to: input.to,
    value,
    fee,
    inputs: [],
    sequenceFromChain: BigInt(src.Sequence),
    expiry: { kind: 'ledger', value: BigInt(lastLedgerSequence) },
    details,
    // What the account can send: its balance above the reserve the ledger keeps (fees come from it too).
    available: { native: balance > reserve ? balance - reserve : 0n },
  };
}

/** The Payment `sign` signs: the prepared fields with the allocated Sequence. */
export function xrpPaymentOf(u: XrpUnsigned, sequence: number): Payment {
  const tx: Payment = {
    TransactionType: 'Payment',
    Account: u.account,
    Destination: u.destination,
    Amount: u.amount,
    Fee: u.fee,
    Sequence: sequence,
    LastLedgerSequence: u.lastLedgerSequence,
    Flags: 0,
  };
  if (u.destinationTag !== undefined) tx.DestinationTag = u.destinationTag;
  if (u.memoHex !== undefined) tx.Memos = memosOf(u.memoHex);
  if (u.networkId !== undefined) tx.NetworkID = u.networkId;
  return tx;
}

/** Signs the Payment with the key's Ed25519 secret (xrpl's Wallet); the blob is what `submit` takes. */
export function signXrpTransfer(
  privateKey: Buffer,
  prepared: PreparedTransfer<XrpUnsigned>,
  o: { sequence?: bigint },
): SignedTransfer {
  if (o.sequence === undefined) throw new Error('an XRP Ledger payment needs the Sequence signer allocated');
  if (o.sequence < 0n || o.sequence > 0xffffffffn)
    throw new Error('an XRP Ledger Sequence is a 32-bit number');
  const { publicKey, address } = deriveXrpKey(privateKey);
  if (address !== prepared.unsigned.account) {
    throw new Error('the key does not sign for the account the transfer was prepared for');
  }
  const wallet = new Wallet(publicKey, `ED${privateKey.toString('hex').toUpperCase()}`);
  const { tx_blob: blob } = wallet.sign(xrpPaymentOf(prepared.unsigned, Number(o.sequence)));
  return { signedTx: blob, txHash: hashes.hashSignedTx(blob) };
}

/**
 * `submit` of the signed blob. tesSUCCESS and terQUEUED: accepted. tec…: applied with its fee
 * claimed (the watcher finds it failed). tefALREADY: the node has these bytes (alreadyKnown).
 * tefPAST_SEQ: the Sequence is used; ours when `tx` finds this hash (alreadyKnown), else another
 * transaction took it (rejected). terNO_ACCOUNT: rejected. Other ter… (terPRE_SEQ: an earlier
 * Sequence is not in yet): not applied but may be later, so neither rejected nor known.
 * tem…, tef…, tel…: rejected. RPC errors: rejected (invalidTransaction …) unless they only say
 * the server cannot answer now.
 */
export async function broadcastXrpTransfer(ep: ChainEndpoint, signed: SignedTransfer): Promise<void> {
  const r = await rippled<{ engine_result?: string; engine_result_message?: string }>(ep, 'submit', {
    tx_blob: signed.signedTx,
  });
  if (r.status === 'error' || r.error !== undefined) {
    throw new ChainRpcError(`the ${ep.chain.name} node refused ${rippledErrorText('submit', r)}`, {
      rejected: !isTransientRippledError(r.error ?? ''),
    });
  }
  const er = r.engine_result;
  if (typeof er !== 'string')
    throw new ChainRpcError(`submit: the ${ep.chain.name} node's answer has no engine_result`);
  if (er === 'tesSUCCESS' || er === 'terQUEUED' || er.startsWith('tec')) return;
  const said = `the ${ep.chain.name} node answered ${er}${r.engine_result_message ? ` (${r.engine_result_message})` : ''}`;
  if (er === 'tefALREADY') throw new ChainRpcError(said, { alreadyKnown: true });
  if (er === 'tefPAST_SEQ') {
    const found = await rippled<{ hash?: string }>(ep, 'tx', { transaction: signed.txHash, binary: false });
    if (found.status !== 'error' && found.error === undefined && typeof found.hash === 'string') {
      throw new ChainRpcError(`${said}: the ledger has this transaction`, { alreadyKnown: true });
    }
    if (found.error === 'txnNotFound') {
      throw new ChainRpcError(`${said}: another transaction used this Sequence`, { rejected: true });
    }
    throw new ChainRpcError(
      `${said}; whether the ledger has this transaction is not known (${rippledErrorText('tx', found)})`,
    );
  }
  if (er === 'terNO_ACCOUNT') throw new ChainRpcError(said, { rejected: true });
  if (er.startsWith('ter')) throw new ChainRpcError(said);
  throw new ChainRpcError(said, { rejected: true });
}

interface TxAnswer {
  hash?: string;
  validated?: boolean;
  ledger_index?: number;
  Fee?: string;
  tx_json?: { Fee?: string };
  meta?: { TransactionResult?: string } | string;
  searched_all?: boolean;
}

/** The status of a transaction `tx` found in a validated ledger: confirmed on tesSUCCESS, else failed. */
function validatedStatus(ep: ChainEndpoint, r: TxAnswer): TransferStatus {
  const meta = typeof r.meta === 'object' ? r.meta : undefined;
  const result = meta?.TransactionResult;
  const fee = r.Fee ?? r.tx_json?.Fee;
  const block = Number.isInteger(r.ledger_index) ? BigInt(r.ledger_index as number) : undefined;
  const extra = {
    ...(block === undefined ? {} : { block }),
    ...(typeof fee === 'string' && /^\d+$/.test(fee) ? { fee: BigInt(fee) } : {}),
  };
  if (result === 'tesSUCCESS') return { state: 'confirmed', ...extra };
  if (typeof result !== 'string') {
    throw new ChainRpcError(`tx: the ${ep.chain.name} node's validated transaction has no TransactionResult`);
  }
  return { state: 'failed', reason: result, ...extra };
}

/** `tx` by hash (within the transaction's ledger window when its LastLedgerSequence is known). */
async function lookUp(
  ep: ChainEndpoint,
  txHash: string,
  lls: number | undefined,
): Promise<TxAnswer & RippledResult> {
  const params: Record<string, unknown> = { transaction: txHash, binary: false };
  if (lls !== undefined) {
    params.min_ledger = Math.max(1, lls - LEDGER_WINDOW);
    params.max_ledger = lls;
  }
  const r = await rippled<TxAnswer>(ep, 'tx', params);
  if ((r.status === 'error' || r.error !== undefined) && r.error !== 'txnNotFound') {
    throw new ChainRpcError(`the ${ep.chain.name} node could not answer ${rippledErrorText('tx', r)}`);
  }
  return r;
}

/** The signed payment's Account and Sequence, from its blob. */
function accountSequenceOf(blob: string): { account: string; sequence: number } | undefined {
  try {
    const tx = decode(blob) as { Account?: unknown; Sequence?: unknown };
    if (typeof tx.Account === 'string' && typeof tx.Sequence === 'number') {
      return { account: tx.Account, sequence: tx.Sequence };
    }
  } catch {
    /* not a blob this adapter made */
  }
  return undefined;
}

/**
 * Where a payment is. `tx` by hash: in a validated ledger, confirmed (tesSUCCESS) or failed (tec…,
 * the fee spent). Otherwise, before the ledger LastLedgerSequence is validated: pending when the
 * node knows it (open ledger, queue or its cache), unknown when not (signer sends it again). Once
 * that ledger is validated, the account's Sequence in the validated ledger decides — no complete
 * history needed: not past ours, the payment was never applied and never can be (expired, the
 * Sequence given back); past ours, one more lookup: in a validated ledger as above, else another
 * transaction took the Sequence (failed; the Sequence stays used).
 */
export async function xrpTransferStatus(
  ep: ChainEndpoint,
  t: { txHash: string; signedTx: string; expiry?: PreparedTransfer['expiry'] },
): Promise<TransferStatus> {
  const lls = t.expiry?.kind === 'ledger' ? Number(t.expiry.value) : undefined;
  const r = await lookUp(ep, t.txHash, lls);
  const found = r.error === undefined && r.status !== 'error';
  if (found && r.validated === true) return validatedStatus(ep, r);
  if (lls === undefined) return found ? { state: 'pending' } : { state: 'unknown' };
  const validated = await validatedLedgerIndex(ep);
  // Ledger LastLedgerSequence itself may still hold it until it is validated.
  if (validated < lls) return found ? { state: 'pending' } : { state: 'unknown' };
  const ours = accountSequenceOf(t.signedTx);
  if (!ours) {
    throw new ChainRpcError('the signed payment has no Account and Sequence to judge its expiry by');
  }
  const acct = await accountInfo(ep, ours.account, 'validated');
  if (!acct || acct.Sequence <= ours.sequence) {
    return {
      state: 'expired',
      reason: `not applied by its LastLedgerSequence ${lls} (validated ledger ${validated}): the account's Sequence is still ${acct?.Sequence ?? 'unset'}, ours ${ours.sequence}`,
    };
  }
  // The Sequence is used: by ours (validated meanwhile) or by another transaction.
  const again = await lookUp(ep, t.txHash, lls);
  if (again.error === undefined && again.status !== 'error' && again.validated === true) {
    return validatedStatus(ep, again);
  }
  // The node could not search every ledger up to LastLedgerSequence (history missing): ours may
  // be the one that used the Sequence. Calling it failed could make the agent pay twice; it stays
  // pending (it holds a Sequence the chain has passed anyway) until a node with the history answers.
  if (again.searched_all === false) return { state: 'pending' };
  return {
    state: 'failed',
    reason: `its sequence (${ours.sequence}) was consumed by another transaction: it is in no ledger up to its LastLedgerSequence ${lls}`,
  };
}

/** XRP transfers (native XRP Payments). */
export const xrpTransfers: TransferOps<XrpUnsigned> = {
  parse: parseXrpTransfer,
  prepare: prepareXrpTransfer,
  sign: (privateKey, prepared, o) => signXrpTransfer(privateKey, prepared, o),
  broadcast: broadcastXrpTransfer,
  status: xrpTransferStatus,
};
