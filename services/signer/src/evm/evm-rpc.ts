import { UnavailableError } from '@custos/service-kit';
import { FetchRequest, JsonRpcProvider, Network, isError, toQuantity } from 'ethers';

/** A call or transaction as the node sees it for eth_call / eth_estimateGas. */
export interface EvmCall {
  from: string;
  to: string | null;
  value: bigint;
  data: string;
  gasLimit?: bigint;
}

/** What eth_call answered: success with its return data, or a revert with its decoded reason. */
export type EvmCallResult = { ok: true; data: string } | { ok: false; reason: string; data: string };

/** A mined transaction's receipt, as the watcher needs it. */
export interface EvmReceipt {
  status: 0 | 1;
  blockNumber: bigint;
  gasUsed: bigint;
  effectiveGasPrice: bigint | null;
}

/** The chain's current fee suggestion (EIP-1559 and legacy). */
export interface EvmFeeData {
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
  gasPrice: bigint;
}

/** The node refused a transaction or call outright (a JSON-RPC error), or could not be reached. */
export class EvmRpcError extends Error {
  constructor(
    message: string,
    /** True when the node answered with an error (the request reached it and was refused). */
    readonly rejected: boolean,
  ) {
    super(message);
    this.name = 'EvmRpcError';
  }
}

/** The JSON-RPC calls signer makes on an EVM chain. */
export interface EvmRpc {
  feeData(): Promise<EvmFeeData>;
  /** eth_estimateGas; a revert is an EvmRevert. */
  estimateGas(c: EvmCall): Promise<bigint>;
  /** eth_call at `latest`. */
  call(c: EvmCall): Promise<EvmCallResult>;
  /** eth_getTransactionCount(address, 'pending'). */
  pendingNonce(address: string): Promise<number>;
  /** eth_sendRawTransaction; returns the hash the node gives. */
  sendRawTransaction(signedTx: string): Promise<string>;
  /** eth_getTransactionReceipt; null while not mined. */
  receipt(txHash: string): Promise<EvmReceipt | null>;
}

/** eth_estimateGas found that the call reverts. */
export class EvmRevert extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'EvmRevert';
  }
}

function callParams(c: EvmCall): Record<string, string> {
  const p: Record<string, string> = { from: c.from, value: toQuantity(c.value), data: c.data || '0x' };
  if (c.to) p.to = c.to;
  if (c.gasLimit !== undefined) p.gas = toQuantity(c.gasLimit);
  return p;
}

/** The revert reason ethers decoded (Error(string), Panic, custom error data), or a plain one. */
export function revertReason(err: unknown): string {
  const e = err as {
    reason?: string | null;
    revert?: { name?: string; args?: unknown[] } | null;
    data?: string | null;
  };
  // ethers names an empty revert `require(false)`; say what happened instead.
  if (!e.data || e.data === '0x') return 'execution reverted (no reason given)';
  if (e.reason) return e.reason;
  return `execution reverted (custom error ${e.data.slice(0, 10)})`;
}

function revertData(err: unknown): string {
  const d = (err as { data?: unknown }).data;
  return typeof d === 'string' ? d : '0x';
}

/**
 * EvmRpc over an ethers JsonRpcProvider bound to one chain id (no network detection: the registry
 * names the chain). A transport failure is an EvmRpcError (rejected: false); a JSON-RPC error answer
 * is one with rejected: true. The URL (which may hold an API key) is never put in an error.
 */
export class JsonRpcEvm implements EvmRpc {
  private readonly provider: JsonRpcProvider;

  constructor(url: string, chainId: bigint, timeoutMs: number) {
    const req = new FetchRequest(url);
    req.timeout = timeoutMs;
    const network = Network.from(chainId);
    this.provider = new JsonRpcProvider(req, network, { staticNetwork: network, batchMaxCount: 1 });
  }

  private async send<T>(method: string, params: unknown[]): Promise<T> {
    try {
      return (await this.provider.send(method, params)) as T;
    } catch (err) {
      if (isError(err, 'CALL_EXCEPTION')) throw new EvmRevert(revertReason(err));
      throw new EvmRpcError(`${method} failed: ${describeRpcError(err)}`, isRejection(err));
    }
  }

  async feeData(): Promise<EvmFeeData> {
    const [block, gasPrice, tip] = await Promise.all([
      this.send<{ baseFeePerGas?: string | null }>('eth_getBlockByNumber', ['latest', false]),
      this.send<string>('eth_gasPrice', []),
      this.send<string>('eth_maxPriorityFeePerGas', []).catch(() => null),
    ]);
    const gas = BigInt(gasPrice);
    const priority = tip !== null ? BigInt(tip) : 1_000_000_000n;
    const base = block?.baseFeePerGas ? BigInt(block.baseFeePerGas) : gas;
    return { maxFeePerGas: base * 2n + priority, maxPriorityFeePerGas: priority, gasPrice: gas };
  }

  async estimateGas(c: EvmCall): Promise<bigint> {
    return BigInt(await this.send<string>('eth_estimateGas', [callParams(c)]));
  }

  async call(c: EvmCall): Promise<EvmCallResult> {
    try {
      return { ok: true, data: await this.provider.send('eth_call', [callParams(c), 'latest']) };
    } catch (err) {
      if (isError(err, 'CALL_EXCEPTION'))
        return { ok: false, reason: revertReason(err), data: revertData(err) };
      throw new EvmRpcError(`eth_call failed: ${describeRpcError(err)}`, isRejection(err));
    }
  }

  async pendingNonce(address: string): Promise<number> {
    return Number(BigInt(await this.send<string>('eth_getTransactionCount', [address, 'pending'])));
  }

  async sendRawTransaction(signedTx: string): Promise<string> {
    return this.send<string>('eth_sendRawTransaction', [signedTx]);
  }

  async receipt(txHash: string): Promise<EvmReceipt | null> {
    const r = await this.send<{
      status?: string;
      blockNumber: string;
      gasUsed: string;
      effectiveGasPrice?: string;
    } | null>('eth_getTransactionReceipt', [txHash]);
    if (!r) return null;
    return {
      status: r.status === '0x1' ? 1 : 0,
      blockNumber: BigInt(r.blockNumber),
      gasUsed: BigInt(r.gasUsed),
      effectiveGasPrice: r.effectiveGasPrice ? BigInt(r.effectiveGasPrice) : null,
    };
  }

  destroy(): void {
    this.provider.destroy();
  }
}

/** True when the node answered with a JSON-RPC error (it received the request and refused it). */
function isRejection(err: unknown): boolean {
  const e = err as { error?: { code?: unknown } } | null;
  return typeof e?.error?.code === 'number';
}

/** The node's own message (never the URL, never request bodies). */
export function describeRpcError(err: unknown): string {
  const e = err as { code?: string; error?: { message?: string }; shortMessage?: string };
  const msg = e.error?.message ?? e.shortMessage ?? e.code ?? 'unknown error';
  return String(msg)
    .replace(/https?:\/\/\S+/g, '<url>')
    .slice(0, 300);
}

/**
 * One EvmRpc per rpc_url, reused by every request on that chain (ethers keeps its connection
 * pool); `forChain` answers 503 when the chain has no endpoint configured.
 */
export class EvmRpcPool {
  private readonly byUrl = new Map<string, JsonRpcEvm>();

  constructor(private readonly timeoutMs: number) {}

  forChain(chain: { name: string; rpcUrl: string; chainId: bigint }): EvmRpc {
    if (!chain.rpcUrl) {
      throw new UnavailableError(`the chain ${chain.name} has no RPC endpoint configured on this install`);
    }
    const key = `${chain.chainId}|${chain.rpcUrl}`;
    let rpc = this.byUrl.get(key);
    if (!rpc) {
      rpc = new JsonRpcEvm(chain.rpcUrl, chain.chainId, this.timeoutMs);
      this.byUrl.set(key, rpc);
    }
    return rpc;
  }

  close(): void {
    for (const r of this.byUrl.values()) r.destroy();
    this.byUrl.clear();
  }
}
