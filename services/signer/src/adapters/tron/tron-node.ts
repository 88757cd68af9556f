import { chainJson } from '../http.js';
import { ChainRpcError, type ChainEndpoint } from '../../keys/chain-adapter.js';

/** A block as `/wallet/getnowblock` answers it (the fields used). */
export interface TronBlock {
  blockID: string;
  block_header: { raw_data: { number?: number; timestamp?: number } };
}

/** `/wallet/gettransactioninfobyid`'s answer: `{}` until the transaction is in a block. */
export interface TronTxInfo {
  id?: string;
  fee?: number;
  blockNumber?: number;
  blockTimeStamp?: number;
  result?: string;
  resMessage?: string;
  /** The call's return data (hex words), or a revert's data. */
  contractResult?: string[];
  receipt?: { result?: string; net_fee?: number; energy_fee?: number };
}

/** A node's answer to `/wallet/broadcasttransaction`. */
export interface TronBroadcastAnswer {
  result?: boolean;
  txid?: string;
  code?: string;
  message?: string;
  Error?: string;
}

/** The chain's fee parameters (`/wallet/getchainparameters`), in sun. */
export interface TronFeeParams {
  /** Sun per byte of bandwidth burnt when the account has no bandwidth of its own. */
  transactionFee: bigint;
  /** Bandwidth fee for a transfer that creates the recipient's account. */
  createAccountFee: bigint;
  /** The extra fee burnt when a TRX transfer creates an account. */
  createNewAccountFeeInSystemContract: bigint;
  /** Burnt for a transaction with a memo (`raw_data.data`). */
  memoFee: bigint;
  /** Sun per unit of energy. */
  energyFee: bigint;
}

/** Mainnet's values, used for a parameter the node does not list. */
const DEFAULT_FEES: TronFeeParams = {
  transactionFee: 1000n,
  createAccountFee: 100_000n,
  createNewAccountFeeInSystemContract: 1_000_000n,
  memoFee: 1_000_000n,
  energyFee: 420n,
};

/** Text a java-tron node hex-encodes in `message` (shown as is when not hex). */
export function hexText(s: string | undefined): string {
  if (!s) return '';
  if (/^(?:[0-9a-fA-F]{2})+$/.test(s)) return Buffer.from(s, 'hex').toString('utf8');
  return s;
}

/** One call of the TRON full-node HTTP API (`POST /wallet/…`, JSON body). */
export async function tronCall<T>(ep: ChainEndpoint, path: string, body: unknown = {}): Promise<T> {
  const answer = await chainJson<T & { Error?: string }>(ep, {
    method: 'POST',
    path,
    body: JSON.stringify(body),
  });
  if (answer === null || typeof answer !== 'object') {
    throw new ChainRpcError(`${path}: the ${ep.chain.name} node answered something that is not an object`);
  }
  // java-tron answers a request it cannot serve with 200 and {"Error": "..."}.
  if (typeof answer.Error === 'string') {
    throw new ChainRpcError(`${path}: ${answer.Error.slice(0, 300)}`);
  }
  return answer;
}

/** The node's latest block: number, timestamp and id. */
export async function nowBlock(
  ep: ChainEndpoint,
): Promise<{ number: number; timestamp: number; blockID: string }> {
  const b = await tronCall<TronBlock>(ep, '/wallet/getnowblock');
  const number = b.block_header?.raw_data?.number ?? 0;
  const timestamp = b.block_header?.raw_data?.timestamp;
  if (typeof b.blockID !== 'string' || !/^[0-9a-f]{64}$/i.test(b.blockID) || typeof timestamp !== 'number') {
    throw new ChainRpcError(`/wallet/getnowblock: the ${ep.chain.name} node's block has no id or timestamp`);
  }
  return { number, timestamp, blockID: b.blockID.toLowerCase() };
}

/** An account's TRX balance in sun and whether it exists on chain (an unactivated account is `{}`). */
export async function accountOf(
  ep: ChainEndpoint,
  address: string,
): Promise<{ exists: boolean; balance: bigint }> {
  const a = await tronCall<{ address?: string; balance?: number; create_time?: number }>(
    ep,
    '/wallet/getaccount',
    {
      address,
      visible: true,
    },
  );
  const exists = typeof a.address === 'string' || typeof a.create_time === 'number';
  return { exists, balance: BigInt(a.balance ?? 0) };
}

/** The chain's fee parameters (mainnet's for one the node does not list). */
export async function feeParams(ep: ChainEndpoint): Promise<TronFeeParams> {
  const a = await tronCall<{ chainParameter?: Array<{ key: string; value?: number }> }>(
    ep,
    '/wallet/getchainparameters',
  );
  const list = a.chainParameter ?? [];
  const get = (key: string, dflt: bigint): bigint => {
    const p = list.find((x) => x.key === key);
    // A listed parameter without a value is 0 (java-tron leaves zeros out).
    return p ? BigInt(p.value ?? 0) : dflt;
  };
  return {
    transactionFee: get('getTransactionFee', DEFAULT_FEES.transactionFee),
    createAccountFee: get('getCreateAccountFee', DEFAULT_FEES.createAccountFee),
    createNewAccountFeeInSystemContract: get(
      'getCreateNewAccountFeeInSystemContract',
      DEFAULT_FEES.createNewAccountFeeInSystemContract,
    ),
    memoFee: get('getMemoFee', DEFAULT_FEES.memoFee),
    energyFee: get('getEnergyFee', DEFAULT_FEES.energyFee),
  };
}

/** True when a smart contract is deployed at `address` (`/wallet/getcontract`, `{}` when none). */
export async function contractExists(ep: ChainEndpoint, address: string): Promise<boolean> {
  const a = await tronCall<{ contract_address?: string; bytecode?: string }>(ep, '/wallet/getcontract', {
    value: address,
    visible: true,
  });
  return typeof a.contract_address === 'string';
}

/** A read-only contract call (`/wallet/triggerconstantcontract`): its first result word and energy. */
export async function constantCall(
  ep: ChainEndpoint,
  o: { owner: string; contract: string; selector: string; parameter: string },
): Promise<{ ok: boolean; result: string; energyUsed: bigint; message: string }> {
  const a = await tronCall<{
    result?: { result?: boolean; code?: string; message?: string };
    constant_result?: string[];
    energy_used?: number;
    transaction?: { ret?: Array<{ ret?: string }> };
  }>(ep, '/wallet/triggerconstantcontract', {
    owner_address: o.owner,
    contract_address: o.contract,
    function_selector: o.selector,
    parameter: o.parameter,
    visible: true,
  });
  const failed =
    a.result?.result !== true ||
    a.transaction?.ret?.some((r) => r.ret !== undefined && r.ret !== 'SUCCESS') === true;
  return {
    ok: !failed,
    result: a.constant_result?.[0] ?? '',
    energyUsed: BigInt(a.energy_used ?? 0),
    message: a.result?.code
      ? `${a.result.code}: ${hexText(a.result.message)}`
      : hexText(a.result?.message ?? ''),
  };
}

/**
 * A failed call's reason: the revert data's `Error(string)` (selector 08c379a0) decoded, or
 * `Panic(uint256)`'s code; the node's message when the data says nothing.
 */
export function revertReason(data: string, nodeMessage: string): string {
  const d = data.replace(/^0x/, '').toLowerCase();
  if (d.startsWith('08c379a0') && d.length >= 8 + 128) {
    try {
      const offset = Number(BigInt(`0x${d.slice(8, 72)}`));
      const lenAt = 8 + offset * 2;
      const len = Number(BigInt(`0x${d.slice(lenAt, lenAt + 64)}`));
      const bytes = d.slice(lenAt + 64, lenAt + 64 + len * 2);
      if (bytes.length === len * 2) {
        // Control characters out: the reason is shown to the agent and written to logs.
        return Buffer.from(bytes, 'hex')
          .toString('utf8')
          .replace(/\p{Cc}/gu, ' ')
          .slice(0, 300);
      }
    } catch {
      /* not a well-formed Error(string): fall through */
    }
  }
  if (d.startsWith('4e487b71') && d.length === 8 + 64)
    return `Panic(0x${BigInt(`0x${d.slice(8)}`).toString(16)})`;
  return nodeMessage || (d ? `reverted with data 0x${d.slice(0, 200)}` : 'reverted without a reason');
}
