import { Interface, dataLength } from 'ethers';

const ERC20 = new Interface([
  'function transfer(address to, uint256 amount)',
  'function approve(address spender, uint256 amount)',
  'function transferFrom(address from, address to, uint256 amount)',
]);

/**
 * Every address an EVM transaction sends value to or empowers, for sanctions screening: its `to`,
 * and for an ERC-20 `transfer`/`transferFrom` the token's recipient, for `approve` the spender.
 * Calldata that does not decode adds nothing (the `to` is still screened).
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
  if (!fn || dataLength(data) < 4 + 32 * fn.inputs.length) return out;
  try {
    const args = ERC20.decodeFunctionData(fn, data);
    out.push(String(fn.name === 'approve' ? args.getValue('spender') : args.getValue('to')));
  } catch {
    // not an ERC-20 call after all: only `to` is screened
  }
  return out;
}
