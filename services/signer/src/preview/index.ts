// The approver's preview of an agent's EVM (or other-chain) transaction: decoded call, simulated
// outcome, and flags where the agent's summary disagrees with the payload. See build-preview.ts.
export { buildPreview, DEFAULT_TIMEOUT_MS } from './build-preview.js';
export { decodeCall, registerAbi } from './abi-registry.js';
export { JsonRpcPreview, PreviewRpcPool, isTraceUnsupported } from './preview-rpc.js';
export {
  TraceUnsupportedError,
  type CallKind,
  type DecodedCall,
  type PrestateDiff,
  type PreviewFlag,
  type PreviewInput,
  type PreviewRpc,
  type PreviewSummary,
  type ChainTokenTransferJson,
  type TokenTransferJson,
} from './preview-types.js';
