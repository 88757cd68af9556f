import { createHash } from 'node:crypto';
import { utils } from 'tronweb';

/** The selector of TRC-20 `transfer(address,uint256)`. */
export const TRC20_TRANSFER = 'a9059cbb';
/** The selector of TRC-20 `balanceOf(address)`. */
export const TRC20_BALANCE_OF = '70a08231';
/** The selector of TRC-20 `decimals()`. */
export const TRC20_DECIMALS = '313ce567';

/** A transaction's `raw_data` as the TRON HTTP API writes it (hex addresses, `visible: false`). */
export interface TronRawData {
  contract: [
    {
      parameter: { value: Record<string, string | number>; type_url: string };
      type: 'TransferContract' | 'TriggerSmartContract';
    },
  ];
  ref_block_bytes: string;
  ref_block_hash: string;
  expiration: number;
  timestamp: number;
  fee_limit?: number;
  data?: string;
}

/** An unsigned transaction as `/wallet/createtransaction` answers it. */
export interface TronUnsignedTx {
  visible: false;
  txID: string;
  raw_data: TronRawData;
  raw_data_hex: string;
}

/** A signed transaction, what `/wallet/broadcasttransaction` takes. */
export interface TronSignedTx extends TronUnsignedTx {
  signature: string[];
}

/** What a raw transaction says, decoded from its protobuf bytes (`raw_data_hex`). */
export interface DecodedTronTx {
  type: string;
  owner: string;
  /** TRX: the recipient; TRC-20: the recipient inside `transfer(to, amount)` (hex `41…`). */
  to?: string;
  /** TRX: sun; TRC-20: the token's base units from `transfer`'s amount. */
  amount?: bigint;
  /** TRC-20: the token contract (hex `41…`). */
  contract?: string;
  /** TRC-20: the call's TRX value (must be 0). */
  callValue?: bigint;
  /** TRC-20: the call's TRC-10 token value and id (must be 0). */
  callTokenValue?: bigint;
  /** TRC-20: the call data (hex). */
  callData?: string;
  refBlockBytes: string;
  refBlockHash: string;
  expiration: number;
  timestamp: number;
  feeLimit: number;
  /** `raw_data.data` (hex; '' when none). */
  data: string;
  /** The number of contracts in the transaction (1 for every transfer). */
  contracts: number;
}

/** sha256 of the raw bytes, lower-case hex: a transaction's id. */
export function txIdOf(rawDataHex: string): string {
  return createHash('sha256').update(Buffer.from(rawDataHex, 'hex')).digest('hex');
}

/** The protobuf bytes (lower-case hex) that a `raw_data` JSON encodes to (tronweb's encoder). */
export function encodeRawData(raw: TronRawData | Record<string, unknown>, visible = false): string {
  const pb = utils.transaction.txJsonToPb({ raw_data: raw, visible });
  return utils.transaction.txPbToRawDataHex(pb).toLowerCase();
}

/** A 32-byte ABI word of an address (`41…` hex: the 20 bytes after the prefix). */
function addressWord(hex41: string): string {
  return hex41.slice(2).padStart(64, '0');
}

/** The call data of `transfer(to, amount)`. */
export function trc20TransferData(toHex41: string, amount: bigint): string {
  return `${TRC20_TRANSFER}${addressWord(toHex41)}${amount.toString(16).padStart(64, '0')}`;
}

/** The call parameter (no selector) of `balanceOf(owner)`. */
export function trc20BalanceOfParameter(ownerHex41: string): string {
  return addressWord(ownerHex41);
}

/** `transfer(to, amount)` call data read back: recipient (`41…`) and amount; null when not that call. */
export function parseTrc20Transfer(data: string): { to: string; amount: bigint } | null {
  const d = data.toLowerCase();
  if (!d.startsWith(TRC20_TRANSFER) || d.length !== 8 + 128) return null;
  const toWord = d.slice(8, 72);
  if (!/^0{24}/.test(toWord)) return null;
  return { to: `41${toWord.slice(24)}`, amount: BigInt(`0x${d.slice(72)}`) };
}

const bytesHex = (b: Uint8Array | string): string =>
  typeof b === 'string' ? Buffer.from(b, 'base64').toString('hex') : Buffer.from(b).toString('hex');

interface PbContract {
  getType(): number;
  getParameter(): { getValue_asU8(): Uint8Array; getTypeUrl(): string };
}
interface PbRaw {
  getContractList(): PbContract[];
  getRefBlockBytes_asU8(): Uint8Array;
  getRefBlockHash_asU8(): Uint8Array;
  getExpiration(): number;
  getTimestamp(): number;
  getFeeLimit(): number;
  getData_asU8(): Uint8Array;
}
interface PbTransfer {
  getOwnerAddress_asU8(): Uint8Array;
  getToAddress_asU8(): Uint8Array;
  getAmount(): number;
}
interface PbTrigger {
  getOwnerAddress_asU8(): Uint8Array;
  getContractAddress_asU8(): Uint8Array;
  getCallValue(): number;
  getData_asU8(): Uint8Array;
  getCallTokenValue(): number;
  getTokenId(): number;
}
interface TronProto {
  Transaction: { raw: { deserializeBinary(b: Uint8Array): PbRaw } };
  TransferContract: { deserializeBinary(b: Uint8Array): PbTransfer };
  TriggerSmartContract: { deserializeBinary(b: Uint8Array): PbTrigger };
}

/** tronweb's protobuf classes (loaded with tronweb). */
function proto(): TronProto {
  return (globalThis as unknown as { TronWebProto: TronProto }).TronWebProto;
}

/**
 * Reads a raw transaction from its protobuf bytes (not from the JSON beside them): what the
 * signature will cover. Throws on bytes that are not a transaction.
 */
export function decodeRawTx(rawDataHex: string): DecodedTronTx {
  if (!/^(?:[0-9a-fA-F]{2})+$/.test(rawDataHex)) throw new Error('raw_data_hex is not hex');
  const P = proto();
  const raw = P.Transaction.raw.deserializeBinary(Buffer.from(rawDataHex, 'hex'));
  const contracts = raw.getContractList();
  const c = contracts[0];
  if (!c) throw new Error('the transaction has no contract');
  const common = {
    refBlockBytes: bytesHex(raw.getRefBlockBytes_asU8()),
    refBlockHash: bytesHex(raw.getRefBlockHash_asU8()),
    expiration: raw.getExpiration(),
    timestamp: raw.getTimestamp(),
    feeLimit: raw.getFeeLimit(),
    data: bytesHex(raw.getData_asU8()),
    contracts: contracts.length,
  };
  const value = c.getParameter().getValue_asU8();
  const typeUrl = c.getParameter().getTypeUrl();
  if (c.getType() === 1 && typeUrl === 'type.googleapis.com/protocol.TransferContract') {
    const t = P.TransferContract.deserializeBinary(value);
    return {
      ...common,
      type: 'TransferContract',
      owner: bytesHex(t.getOwnerAddress_asU8()),
      to: bytesHex(t.getToAddress_asU8()),
      amount: BigInt(t.getAmount()),
    };
  }
  if (c.getType() === 31 && typeUrl === 'type.googleapis.com/protocol.TriggerSmartContract') {
    const t = P.TriggerSmartContract.deserializeBinary(value);
    const callData = bytesHex(t.getData_asU8());
    const call = parseTrc20Transfer(callData);
    return {
      ...common,
      type: 'TriggerSmartContract',
      owner: bytesHex(t.getOwnerAddress_asU8()),
      contract: bytesHex(t.getContractAddress_asU8()),
      callValue: BigInt(t.getCallValue()),
      callTokenValue: BigInt(t.getCallTokenValue()) + BigInt(t.getTokenId()),
      callData,
      ...(call ? { to: call.to, amount: call.amount } : {}),
    };
  }
  return { ...common, type: `contract type ${c.getType()}`, owner: '' };
}
