import { FetchRequest, JsonRpcProvider, Network, toQuantity } from 'ethers';
import { EndpointPool, describeRpcError, isRevert, revertReason, rpcError } from '../evm/evm-rpc.js';
import {
  TraceUnsupportedError,
  type EvmCall,
  type EvmCallResult,
  type PrestateDiff,
  type PreviewRpc,
} from './preview-types.js';

function callParams(c: EvmCall): Record<string, string> {
  const p: Record<string, string> = { from: c.from, value: toQuantity(c.value), data: c.data || '0x' };
  if (c.to) p.to = c.to;
  if (c.gasLimit !== undefined) p.gas = toQuantity(c.gasLimit);
  return p;
}

/** The node's JSON-RPC error under an ethers error (`error`, or `info.error`). */
function nodeError(err: unknown): { code?: unknown; message?: unknown } | undefined {
  const e = err as { error?: unknown; info?: { error?: unknown } } | null;
  const inner = e?.error ?? e?.info?.error;
  return inner && typeof inner === 'object' ? (inner as { code?: unknown; message?: unknown }) : undefined;
}

// Node answers meaning "no such method / tracer here" (geth, anvil, erigon, besu, nethermind, hosted RPCs).
const UNSUPPORTED_TEXT =
  /method not found|does not exist|not available|not supported|unsupported|unknown method|not allowed|not whitelisted|tracer .*not (found|defined)|disabled/i;

/** True when a debug_traceCall failure means the node does not offer it (rather than a failed attempt). */
export function isTraceUnsupported(err: unknown): boolean {
  const inner = nodeError(err);
  if (inner?.code === -32601 || inner?.code === -32004) return true;
  const code = (err as { code?: unknown } | null)?.code;
  if (code === 'UNSUPPORTED_OPERATION') return true;
  const msg = typeof inner?.message === 'string' ? inner.message : '';
  return UNSUPPORTED_TEXT.test(msg);
}

/**
 * The preview's chain access over one JSON-RPC endpoint: eth_call as signer's EvmRpc makes it, and
 * debug_traceCall with the prestateTracer in diffMode. Its own ethers provider (signer's JsonRpcEvm
 * keeps its provider private), one attempt per call, bounded by `timeoutMs`; errors never carry
 * the URL.
 */
export class JsonRpcPreview implements PreviewRpc {
  private readonly provider: JsonRpcProvider;

  constructor(url: string, chainId: bigint, timeoutMs: number) {
    const req = new FetchRequest(url);
    req.timeout = timeoutMs;
    req.setThrottleParams({ maxAttempts: 1 });
    const network = Network.from(chainId);
    this.provider = new JsonRpcProvider(req, network, { staticNetwork: network, batchMaxCount: 1 });
  }

  async call(c: EvmCall): Promise<EvmCallResult> {
    try {
      return { ok: true, data: (await this.provider.send('eth_call', [callParams(c), 'latest'])) as string };
    } catch (err) {
      if (isRevert(err)) {
        const d = (err as { data?: unknown }).data;
        return { ok: false, reason: revertReason(err), data: typeof d === 'string' ? d : '0x' };
      }
      throw rpcError('eth_call', err);
    }
  }

  async traceCall(c: EvmCall): Promise<PrestateDiff> {
    try {
      const r = (await this.provider.send('debug_traceCall', [
        callParams(c),
        'latest',
        { tracer: 'prestateTracer', tracerConfig: { diffMode: true } },
      ])) as PrestateDiff | null;
      if (!r || typeof r !== 'object' || !('pre' in r || 'post' in r)) {
        // A node that ignores the tracer config answers a struct log: no balance diff to read.
        throw new TraceUnsupportedError('debug_traceCall answered without a prestate diff');
      }
      return { pre: r.pre ?? {}, post: r.post ?? {} };
    } catch (err) {
      if (err instanceof TraceUnsupportedError) throw err;
      if (isTraceUnsupported(err)) {
        throw new TraceUnsupportedError(`debug_traceCall is not supported: ${describeRpcError(err)}`);
      }
      // A reverted traced call answers its diff on geth/anvil; an error here is a failed attempt.
      throw rpcError('debug_traceCall', err);
    }
  }

  destroy(): void {
    this.provider.destroy();
  }
}

/** One JsonRpcPreview per chain endpoint, reused across previews (see EndpointPool). */
export class PreviewRpcPool extends EndpointPool<JsonRpcPreview> {
  constructor(timeoutMs: number) {
    super((url, chainId) => new JsonRpcPreview(url, chainId, timeoutMs));
  }
}
