import { CustosError, InvalidArgumentError } from '@custos/service-kit';
import type { EvmRpc } from './evm-rpc.js';
import { EvmRevert } from './evm-rpc.js';
import type { EvmTxFields } from './evm-tx.js';
import { evmCaps } from '@custos/guardrails';

/** What a caller asked for, parsed: the fee and gas fields it gave, undefined when left to signer. */
export interface EvmTxRequest {
  chainId: bigint;
  /** The signing key's address. */
  from: string;
  to: string | null;
  value: bigint;
  data: string;
  type: 0 | 2;
  gasLimit?: bigint;
  maxFeePerGas?: bigint;
  maxPriorityFeePerGas?: bigint;
  gasPrice?: bigint;
}

/** The agent's fee and gas guardrails (SPEC §2.4), in wei and gas; undefined: no cap. */
export interface EvmCaps {
  maxFeePerGas?: bigint;
  maxGasLimit?: bigint;
}

/**
 * The caps of an agent's settings (`max_fee_per_gas_gwei`, `max_gas_limit` of identity's Agent), read
 * by @custos/guardrails as its evaluator reads them, so the fill and the guardrail verdicts agree.
 * A setting that cannot be read caps at 0 (fail closed; the guardrails refuse it as
 * `settings_invalid` before anything is signed).
 */
export function evmCapsOf(settings: { maxFeePerGasGwei?: number; maxGasLimit?: string }): EvmCaps {
  const caps = evmCaps(settings);
  if ('invalid' in caps) {
    return caps.invalid === 'max_gas_limit' ? { maxGasLimit: 0n } : { maxFeePerGas: 0n };
  }
  return caps;
}

/** A transaction ready for a nonce, and which fetched amounts were lowered to the agent's caps. */
export type FilledEvmTx = Omit<EvmTxFields, 'nonce'> & { clamped: string[] };

/**
 * Checks the fields a caller gave against the fee and gas caps (400 naming the field when above,
 * or when fields of the other transaction type are given), without calling the chain.
 */
export function checkEvmRequest(req: EvmTxRequest, caps: EvmCaps): void {
  if (req.type === 2 && req.gasPrice !== undefined) {
    throw new InvalidArgumentError(
      'gas_price',
      'is for legacy transactions (tx_type 0); use max_fee_per_gas',
    );
  }
  if (req.type === 0) {
    if (req.maxFeePerGas !== undefined) {
      throw new InvalidArgumentError(
        'max_fee_per_gas',
        'is for EIP-1559 transactions (tx_type 2); use gas_price',
      );
    }
    if (req.maxPriorityFeePerGas !== undefined) {
      throw new InvalidArgumentError(
        'max_priority_fee_per_gas',
        'is for EIP-1559 transactions (tx_type 2); use gas_price',
      );
    }
  }
  const cap = caps.maxFeePerGas;
  if (cap !== undefined) {
    for (const [field, v] of [
      ['max_fee_per_gas', req.maxFeePerGas],
      ['max_priority_fee_per_gas', req.maxPriorityFeePerGas],
      ['gas_price', req.gasPrice],
    ] as const) {
      if (v !== undefined && v > cap) {
        throw new InvalidArgumentError(field, `is above the agent's max_fee_per_gas_gwei (${cap} wei)`);
      }
    }
  }
  if (
    req.maxFeePerGas !== undefined &&
    req.maxPriorityFeePerGas !== undefined &&
    req.maxPriorityFeePerGas > req.maxFeePerGas
  ) {
    throw new InvalidArgumentError('max_priority_fee_per_gas', 'is above max_fee_per_gas');
  }
  if (req.gasLimit !== undefined && caps.maxGasLimit !== undefined && req.gasLimit > caps.maxGasLimit) {
    throw new InvalidArgumentError('gas_limit', `is above the agent's max_gas_limit (${caps.maxGasLimit})`);
  }
}

/**
 * Completes a transaction request with the chain's figures: gas from eth_estimateGas when not
 * given, EIP-1559 fees (or the legacy gas price) from the chain when not given. Caller-given
 * amounts above the agent's caps are 400 naming the field; fetched fees above the cap are lowered
 * to it (named in `clamped`); an estimate above `max_gas_limit` is 400 naming `gas_limit`; a call
 * whose estimate reverts is 422 (`transaction_reverts`) with the reason. The nonce is the caller's
 * to allocate.
 */
export async function fillEvmTransaction(
  rpc: EvmRpc,
  req: EvmTxRequest,
  caps: EvmCaps,
): Promise<FilledEvmTx> {
  checkEvmRequest(req, caps);
  const clamped: string[] = [];
  const needFees =
    req.type === 2
      ? req.maxFeePerGas === undefined || req.maxPriorityFeePerGas === undefined
      : req.gasPrice === undefined;
  const [fees, gasLimit] = await Promise.all([
    needFees ? rpc.feeData() : Promise.resolve(undefined),
    req.gasLimit !== undefined ? Promise.resolve(req.gasLimit) : estimate(rpc, req),
  ]);
  if (req.gasLimit === undefined && caps.maxGasLimit !== undefined && gasLimit > caps.maxGasLimit) {
    throw new InvalidArgumentError(
      'gas_limit',
      `the transaction needs an estimated ${gasLimit} gas, above the agent's max_gas_limit (${caps.maxGasLimit})`,
    );
  }
  const base = { chainId: req.chainId, to: req.to, value: req.value, data: req.data || '0x', gasLimit };
  const cap = caps.maxFeePerGas;
  if (req.type === 0) {
    let gasPrice = req.gasPrice ?? fees!.gasPrice;
    if (req.gasPrice === undefined && cap !== undefined && gasPrice > cap) {
      gasPrice = cap;
      clamped.push('gas_price');
    }
    return { ...base, type: 0, gasPrice, clamped };
  }
  let priority = req.maxPriorityFeePerGas ?? fees!.maxPriorityFeePerGas;
  let maxFee: bigint;
  if (req.maxFeePerGas !== undefined) {
    maxFee = req.maxFeePerGas;
  } else {
    // ethers' suggestion is 2 × base fee + tip; keep the 2 × base fee with the tip actually used.
    const twiceBase = fees!.maxFeePerGas - fees!.maxPriorityFeePerGas;
    maxFee = (twiceBase > 0n ? twiceBase : 0n) + priority;
    if (cap !== undefined && maxFee > cap) {
      maxFee = cap;
      clamped.push('max_fee_per_gas');
    }
  }
  if (priority > maxFee) {
    if (req.maxPriorityFeePerGas !== undefined) {
      throw new InvalidArgumentError(
        'max_priority_fee_per_gas',
        `is above the max fee per gas (${maxFee} wei)`,
      );
    }
    priority = maxFee;
    clamped.push('max_priority_fee_per_gas');
  }
  return { ...base, type: 2, maxFeePerGas: maxFee, maxPriorityFeePerGas: priority, clamped };
}

async function estimate(rpc: EvmRpc, req: EvmTxRequest): Promise<bigint> {
  try {
    return await rpc.estimateGas({ from: req.from, to: req.to, value: req.value, data: req.data });
  } catch (err) {
    if (err instanceof EvmRevert) {
      throw new CustosError('unprocessable', {
        detail: `the transaction would revert: ${err.reason}`,
        type: 'transaction_reverts',
      });
    }
    throw err;
  }
}
