import { InvalidArgumentError } from '@custos/service-kit';
import {
  SigningKey,
  TypedDataEncoder,
  type TypedDataDomain,
  type TypedDataField,
  computeAddress,
  getBytes,
  hashMessage,
  hexlify,
} from 'ethers';
import { parseEvmAddress, parseEvmData, parseEvmValue, parseGasLimit, parseWei } from '../evm/evm-fields.js';
import { INTENT_TYPES, type IntentType, type SignIntentInput } from './sign-types.js';

/** The intent type named in a request, or a 400 naming `intent_type`. */
export function parseIntentType(raw: string): IntentType {
  if ((INTENT_TYPES as readonly string[]).includes(raw)) return raw as IntentType;
  throw new InvalidArgumentError('intent_type', `must be one of ${INTENT_TYPES.join(', ')}`);
}

const EVEN_HEX = /^0x(?:[0-9a-fA-F]{2})*$/;
const DIGEST = /^0x[0-9a-fA-F]{64}$/;

/** personal_sign's `message`: 0x-prefixed hex bytes of even length (`0x` is the empty message). */
export function parseMessage(raw: string | undefined): Uint8Array {
  if (raw === undefined) {
    throw new InvalidArgumentError('message', 'is required for personal_sign (0x-prefixed hex bytes)');
  }
  if (!EVEN_HEX.test(raw)) {
    throw new InvalidArgumentError('message', 'must be 0x-prefixed hex with an even number of digits');
  }
  return getBytes(raw);
}

/** eip712_digest's `hash`: 32 bytes as 0x-prefixed hex; answered lower-case. */
export function parseDigest(raw: string | undefined): string {
  if (raw === undefined) throw new InvalidArgumentError('hash', 'is required for eip712_digest');
  if (!DIGEST.test(raw))
    throw new InvalidArgumentError('hash', 'must be a 32-byte digest: 0x and 64 hex digits');
  return raw.toLowerCase();
}

/** An EIP-712 document, checked: the struct types the primary type uses (EIP712Domain left to ethers). */
export interface TypedDataDoc {
  domain: TypedDataDomain;
  types: Record<string, TypedDataField[]>;
  primaryType: string;
  message: Record<string, unknown>;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The largest typed_data document taken, as JSON text (the gateway refuses a larger one first). */
export const TYPED_DATA_MAX_CHARS = 65_536;

/** At most this many struct types, fields per type and characters per type name or field type. */
export const TYPED_DATA_LIMITS = { types: 100, fields: 100, typeChars: 100 } as const;

/** The struct types `root` reaches through its fields (itself included), walked without recursion. */
export function reachableTypes(types: Record<string, TypedDataField[]>, root: string): Set<string> {
  const seen = new Set<string>([root]);
  const todo = [root];
  for (let name = todo.pop(); name !== undefined; name = todo.pop()) {
    for (const f of types[name]!) {
      const base = f.type.replace(/(\[[0-9]*\])+$/, '');
      if (seen.has(base) || !Object.prototype.hasOwnProperty.call(types, base)) continue;
      seen.add(base);
      todo.push(base);
    }
  }
  return seen;
}

/** A domain's chainId as an integer (number, decimal or 0x text), or undefined when not one. */
function chainIdOf(v: unknown): bigint | undefined {
  if (typeof v === 'number') return Number.isSafeInteger(v) && v >= 0 ? BigInt(v) : undefined;
  if (typeof v === 'string' && /^(?:[0-9]{1,30}|0x[0-9a-fA-F]{1,64})$/.test(v)) return BigInt(v);
  return undefined;
}

/** ethers' short reason for refusing a document, without the stack (values of typed data are not secret). */
function reasonOf(err: unknown): string {
  const e = err as { shortMessage?: string; message?: string };
  return String(e.shortMessage ?? e.message ?? 'invalid').slice(0, 200);
}

/**
 * typed_data's document `{types, primaryType, domain, message}` (EIP-712, as eth_signTypedData_v4
 * takes it), checked with ethers' TypedDataEncoder: a malformed document is a 400 naming
 * `typed_data` (or the member at fault); a domain `chainId` that is not the chain's is a 400 naming
 * `typed_data.domain.chainId`. Types the primary type does not use are left out (ethers refuses
 * unused types); `EIP712Domain` is derived from the domain. Returns the document and its hash.
 */
export function parseTypedData(
  json: string | undefined,
  chainId: bigint,
): { doc: TypedDataDoc; hash: string } {
  if (json === undefined) {
    throw new InvalidArgumentError(
      'typed_data',
      'is required for typed_data: an object {types, primaryType, domain, message}',
    );
  }
  if (json.length > TYPED_DATA_MAX_CHARS) {
    throw new InvalidArgumentError(
      'typed_data',
      `must be at most ${TYPED_DATA_MAX_CHARS} characters of JSON`,
    );
  }
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch {
    throw new InvalidArgumentError(
      'typed_data',
      'must be a JSON object {types, primaryType, domain, message}',
    );
  }
  if (!isObject(v)) {
    throw new InvalidArgumentError('typed_data', 'must be an object {types, primaryType, domain, message}');
  }
  const { types, primaryType, domain, message } = v;
  if (!isObject(types))
    throw new InvalidArgumentError('typed_data.types', 'must be an object of struct types');
  if (!isObject(domain)) throw new InvalidArgumentError('typed_data.domain', 'must be an object');
  if (!isObject(message)) throw new InvalidArgumentError('typed_data.message', 'must be an object');
  const structs: Record<string, TypedDataField[]> = {};
  const L = TYPED_DATA_LIMITS;
  const names = Object.keys(types).filter((n) => n !== 'EIP712Domain');
  if (names.length > L.types) {
    throw new InvalidArgumentError('typed_data.types', `must hold at most ${L.types} struct types`);
  }
  for (const name of names) {
    const fields = types[name];
    if (
      !Array.isArray(fields) ||
      !fields.every((f) => isObject(f) && typeof f['name'] === 'string' && typeof f['type'] === 'string')
    ) {
      throw new InvalidArgumentError(
        'typed_data.types',
        `${name.slice(0, 100)} must be a list of {name, type}`,
      );
    }
    if (
      name.length > L.typeChars ||
      fields.length > L.fields ||
      fields.some(
        (f) => (f['name'] as string).length > L.typeChars || (f['type'] as string).length > L.typeChars,
      )
    ) {
      throw new InvalidArgumentError(
        'typed_data.types',
        `each struct type has at most ${L.fields} fields, and names and types at most ${L.typeChars} characters`,
      );
    }
    structs[name] = fields.map((f) => ({ name: f['name'] as string, type: f['type'] as string }));
  }
  if (typeof primaryType !== 'string' || !Object.prototype.hasOwnProperty.call(structs, primaryType)) {
    throw new InvalidArgumentError('typed_data.primaryType', 'must name a struct type of typed_data.types');
  }
  if (domain['chainId'] !== undefined && domain['chainId'] !== null) {
    const domainChain = chainIdOf(domain['chainId']);
    if (domainChain === undefined) {
      throw new InvalidArgumentError('typed_data.domain.chainId', 'must be an integer');
    }
    if (domainChain !== chainId) {
      throw new InvalidArgumentError(
        'typed_data.domain.chainId',
        `is ${domainChain}, but the chain named has chain_id ${chainId}`,
      );
    }
  }
  let hash: string;
  const used: Record<string, TypedDataField[]> = {};
  try {
    for (const name of reachableTypes(structs, primaryType)) used[name] = structs[name]!;
    const encoder = TypedDataEncoder.from(used);
    if (encoder.primaryType !== primaryType) throw new Error(`the primary type is ${encoder.primaryType}`);
    hash = TypedDataEncoder.hash(domain as TypedDataDomain, used, message);
  } catch (err) {
    throw new InvalidArgumentError('typed_data', `is not valid EIP-712: ${reasonOf(err)}`);
  }
  return { doc: { domain: domain as TypedDataDomain, types: used, primaryType, message }, hash };
}

/** The fields of a `transaction` intent, parsed; fees and gas undefined when left to signer. */
export interface TxIntentFields {
  type: 0 | 2;
  to: string | null;
  value: bigint;
  data: string;
  nonce?: number;
  gasLimit?: bigint;
  gasPrice?: bigint;
  maxFeePerGas?: bigint;
  maxPriorityFeePerGas?: bigint;
}

/**
 * A `transaction` intent's fields (400 naming the field at fault): `tx_type` 2 (default) or 0,
 * `to` (checksummed or lower-case; absent only for a contract creation with `data`), `value` by the
 * DECISIONS.md rule in the chain's native decimals, `data`, `nonce`, `gas_limit` and the fees.
 */
export function parseTxIntent(input: SignIntentInput, nativeDecimals: number): TxIntentFields {
  let type: 0 | 2 = 2;
  if (input.txType !== undefined) {
    if (input.txType !== 0 && input.txType !== 2) {
      throw new InvalidArgumentError('tx_type', 'must be 2 (EIP-1559, the default) or 0 (legacy)');
    }
    type = input.txType;
  }
  const data = input.data === undefined ? '0x' : parseEvmData(input.data);
  let to: string | null = null;
  if (input.to !== undefined && input.to !== '') to = parseEvmAddress(input.to);
  else if (data === '0x')
    throw new InvalidArgumentError('to', 'is required (only a contract creation with data has none)');
  const f: TxIntentFields = {
    type,
    to,
    value: input.value === undefined ? 0n : parseEvmValue(input.value, nativeDecimals),
    data,
  };
  if (input.nonce !== undefined) {
    if (!/^[0-9]{1,16}$/.test(input.nonce) || !Number.isSafeInteger(Number(input.nonce))) {
      throw new InvalidArgumentError('nonce', 'must be a non-negative integer');
    }
    f.nonce = Number(input.nonce);
  }
  if (input.gasLimit !== undefined) f.gasLimit = parseGasLimit(input.gasLimit);
  if (input.gasPrice !== undefined) f.gasPrice = parseWei(input.gasPrice, 'gas_price');
  if (input.maxFeePerGas !== undefined) f.maxFeePerGas = parseWei(input.maxFeePerGas, 'max_fee_per_gas');
  if (input.maxPriorityFeePerGas !== undefined) {
    f.maxPriorityFeePerGas = parseWei(input.maxPriorityFeePerGas, 'max_priority_fee_per_gas');
  }
  return f;
}

/**
 * Signs a 32-byte digest with a secp256k1 private key (the caller owns and zeroes the buffer) and
 * checks that the key is the one the record names: answers the 65-byte signature and the address.
 */
export function signDigest(
  privateKey: Buffer | Uint8Array,
  digest: string,
  expectedAddress: string,
): { signature: string; from: string } {
  if (privateKey.length !== 32) throw new Error('an EVM private key is 32 bytes');
  const k = new SigningKey(hexlify(privateKey));
  const from = computeAddress(k.publicKey);
  if (from !== expectedAddress) throw new Error("the opened key is not the signing key's address");
  return { signature: k.sign(digest).serialized, from };
}

/** The EIP-191 hash personal_sign signs (`"\x19Ethereum Signed Message:\n" + len + message`). */
export function personalMessageHash(message: Uint8Array): string {
  return hashMessage(message);
}
