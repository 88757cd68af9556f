import { Interface, type TypedDataField, TypedDataEncoder, dataLength, getAddress } from 'ethers';

const ERC20 = new Interface([
  'function transfer(address to, uint256 amount)',
  'function approve(address spender, uint256 amount)',
  'function transferFrom(address from, address to, uint256 amount)',
  'function increaseAllowance(address spender, uint256 addedValue)',
]);

/**
 * Every address an EVM transaction sends value to or empowers, for sanctions screening: its `to`,
 * and for an ERC-20 `transfer`/`transferFrom` the token's recipient, for `approve` the spender.
 * An argument word that does not decode as an address adds its low 20 bytes (what a token with the
 * old ABI decoder pays).
 */
export function evmRecipients(to: string | null | undefined, data: string | undefined): string[] {
  const out: string[] = to ? [to] : [];
  if (!data || !/^0x[0-9a-fA-F]*$/.test(data) || data.length < 10) return out;
  let fn;
  try {
    fn = ERC20.getFunction(data.slice(0, 10).toLowerCase());
  } catch {
    return out;
  }
  if (!fn) return out;
  // The word of the recipient (transfer, approve: the first; transferFrom: the second).
  const word = fn.name === 'transferFrom' ? 1 : 0;
  try {
    const args = ERC20.decodeFunctionData(fn, data);
    out.push(
      String(
        fn.name === 'transfer' || fn.name === 'transferFrom' ? args.getValue('to') : args.getValue('spender'),
      ),
    );
  } catch {
    // Arguments that do not decode as an address (dirty high bytes) are still paid by tokens built
    // with the old ABI decoder, which keeps the low 20 bytes: those are screened (fails closed).
    const start = 2 + 8 + word * 64;
    if (dataLength(data) >= 4 + 32 * (word + 1)) out.push(`0x${data.slice(start + 24, start + 64)}`);
  }
  return out;
}

/**
 * Every address field of a typed-data message, walked by its declared types (nested structs and
 * arrays included) and normalised as EIP-712 hashes it (with or without `0x`, checksummed or not,
 * ICAP): what the signature pays or empowers, for sanctions screening. No bound: the document is
 * already bounded in size.
 */
export function typedDataAddresses(doc: {
  types: Record<string, TypedDataField[]>;
  message: Record<string, unknown>;
}): string[] {
  const out: string[] = [];
  TypedDataEncoder.from(doc.types).visit(doc.message, (type, value) => {
    if (type === 'address') out.push(getAddress(String(value)));
    return value;
  });
  return out;
}
