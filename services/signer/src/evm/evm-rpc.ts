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

/**
 * A chain call that did not give an answer to use. `rejected` is true only when the node refused
 * this transaction outright for a reason of its own (nonce already used, insufficient funds, fee
 * too low, invalid): a definite "no" that re-sending the same bytes would not change. A transport
 * failure (timeout, reset, refused connection) or a JSON-RPC error about the node itself (rate
 * limited, overloaded, unknown method) is `rejected: false`: the request may or may not have
 * arrived, so nothing may be concluded about the transaction.
 */
export class EvmRpcError extends Error {
  constructor(
    message: string,
    /** True when the node refused the transaction itself (see above). */
    readonly rejected: boolean,
    /** The ethers error code (NONCE_EXPIRED, INSUFFICIENT_FUNDS, TIMEOUT …) when there is one. */
    readonly code?: string,
  ) {
    super(message);
    this.name = 'EvmRpcError';
  }

  /** The node has this transaction already (pool or chain): a re-send that arrived. */
  get alreadyKnown(): boolean {
    return /already known|known transaction|already imported|already exists/i.test(this.message);
  }

  /** The node says the nonce was used (a mined transaction, ours or another). */
  get nonceUsed(): boolean {
    return this.code === 'NONCE_EXPIRED' || /nonce too low|nonce has already been used/i.test(this.message);
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

/** What the transactions path and its watcher also ask of a chain. */
export interface EvmTxRpc extends EvmRpc {
  /** eth_getTransactionCount(address, 'latest'): how many of the key's transactions are mined. */
  latestNonce(address: string): Promise<number>;
  /** eth_getTransactionByHash: whether the node knows the transaction (pool or chain). */
  knowsTransaction(txHash: string): Promise<boolean>;
  /** The latest block's base fee per gas (null on a chain without EIP-1559). */
  baseFee(): Promise<bigint | null>;
  /** eth_blockNumber: the chain's head. */
  blockNumber(): Promise<bigint>;
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
export class JsonRpcEvm implements EvmTxRpc {
  private readonly provider: JsonRpcProvider;

  constructor(url: string, chainId: bigint, timeoutMs: number) {
    const req = new FetchRequest(url);
    req.timeout = timeoutMs;
    // One attempt: ethers' default throttle re-sends a 429 up to 12 times with back-off, which
    // would let one call outlast EVM_RPC_TIMEOUT_MS and the caller's deadline.
    req.setThrottleParams({ maxAttempts: 1 });
    const network = Network.from(chainId);
    this.provider = new JsonRpcProvider(req, network, { staticNetwork: network, batchMaxCount: 1 });
  }

  private async send<T>(method: string, params: unknown[]): Promise<T> {
    try {
      return (await this.provider.send(method, params)) as T;
    } catch (err) {
      if (isRevert(err)) throw new EvmRevert(revertReason(err));
      throw rpcError(method, err);
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
      if (isRevert(err)) return { ok: false, reason: revertReason(err), data: revertData(err) };
      throw rpcError('eth_call', err);
    }
  }

  async pendingNonce(address: string): Promise<number> {
    return Number(BigInt(await this.send<string>('eth_getTransactionCount', [address, 'pending'])));
  }

  async baseFee(): Promise<bigint | null> {
    const b = await this.send<{ baseFeePerGas?: string | null } | null>('eth_getBlockByNumber', [
      'latest',
      false,
    ]);
    return b?.baseFeePerGas ? BigInt(b.baseFeePerGas) : null;
  }

  async blockNumber(): Promise<bigint> {
    return BigInt(await this.send<string>('eth_blockNumber', []));
  }

  async latestNonce(address: string): Promise<number> {
    return Number(BigInt(await this.send<string>('eth_getTransactionCount', [address, 'latest'])));
  }

  async knowsTransaction(txHash: string): Promise<boolean> {
    return (await this.send<unknown>('eth_getTransactionByHash', [txHash])) !== null;
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

/** The node's JSON-RPC error object under an ethers error (`error`, or `info.error` since 6.x). */
function nodeErrorOf(err: unknown): { code?: unknown; message?: unknown; data?: unknown } | undefined {
  const e = err as { error?: unknown; info?: { error?: unknown } } | null;
  const inner = e?.error ?? e?.info?.error;
  return inner && typeof inner === 'object' ? (inner as { code?: unknown; message?: unknown }) : undefined;
}

/** ethers' codes of a node refusing a transaction itself. */
const REFUSAL_CODES = new Set(['NONCE_EXPIRED', 'INSUFFICIENT_FUNDS', 'REPLACEMENT_UNDERPRICED']);

/**
 * Node messages (geth, anvil, reth, erigon, besu) that refuse the transaction itself. Anything
 * else from the node (rate limits, internal errors, unknown methods) says nothing about the
 * transaction.
 */
const REFUSAL_TEXT =
  /nonce too low|nonce has already been used|insufficient funds|underpriced|intrinsic gas too low|gas limit reached|exceeds block gas limit|max fee per gas less than block base fee|fee cap less than block base fee|less than block base fee|max priority fee per gas higher than max fee per gas|tip above fee cap|invalid sender|invalid signature|invalid chain id|incorrect chain id|transaction type not supported|oversized data|already known|known transaction|already imported/i;

/**
 * True when eth_call / eth_estimateGas found that the call reverts: ethers turns every JSON-RPC
 * error of those methods into CALL_EXCEPTION, so only one with revert data or a node message
 * saying "revert" is a revert; a "rate limited" or "internal error" answer is not.
 */
export function isRevert(err: unknown): boolean {
  if (!isError(err, 'CALL_EXCEPTION')) return false;
  const e = err as { data?: unknown };
  if (typeof e.data === 'string' && e.data !== '') return true;
  const m = nodeErrorOf(err)?.message;
  return typeof m === 'string' && /revert/i.test(m);
}

/** True when the node refused the transaction itself (see EvmRpcError.rejected). */
export function isRejection(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && REFUSAL_CODES.has(code)) return true;
  const inner = nodeErrorOf(err);
  return typeof inner?.message === 'string' && REFUSAL_TEXT.test(inner.message);
}

/** The EvmRpcError of a failed call (the node's message, never the URL). */
export function rpcError(method: string, err: unknown): EvmRpcError {
  const code = (err as { code?: unknown } | null)?.code;
  return new EvmRpcError(
    `${method} failed: ${describeRpcError(err)}`,
    isRejection(err),
    typeof code === 'string' ? code : undefined,
  );
}

/** The node's own message (never the URL, never request bodies). */
export function describeRpcError(err: unknown): string {
  const e = err as { code?: string; shortMessage?: string };
  const inner = nodeErrorOf(err)?.message;
  const msg = (typeof inner === 'string' ? inner : undefined) ?? e.shortMessage ?? e.code ?? 'unknown error';
  return String(msg)
    .replace(/https?:\/\/\S+/g, '<url>')
    .slice(0, 300);
}

/**
 * One client per chain endpoint (chain id and rpc_url), reused by every request on that chain
 * (ethers keeps its connection pool); `forChain` answers 503 when the chain has no endpoint
 * configured. `make` opens a client; `close` destroys them all.
 */
export class EndpointPool<T extends { destroy(): void }> {
  private readonly byUrl = new Map<string, T>();

  constructor(private readonly make: (url: string, chainId: bigint) => T) {}

  forChain(chain: { name: string; rpcUrl: string; chainId: bigint }): T {
    if (!chain.rpcUrl) {
      throw new UnavailableError(`the chain ${chain.name} has no RPC endpoint configured on this install`);
    }
    const key = `${chain.chainId}|${chain.rpcUrl}`;
    let rpc = this.byUrl.get(key);
    if (!rpc) {
      rpc = this.make(chain.rpcUrl, chain.chainId);
      this.byUrl.set(key, rpc);
    }
    return rpc;
  }

  close(): void {
    for (const r of this.byUrl.values()) r.destroy();
    this.byUrl.clear();
  }
}

/** One EvmRpc per chain endpoint (see EndpointPool), each call bounded by `timeoutMs`. */
export class EvmRpcPool extends EndpointPool<JsonRpcEvm> {
  constructor(timeoutMs: number) {
    super((url, chainId) => new JsonRpcEvm(url, chainId, timeoutMs));
  }
}
