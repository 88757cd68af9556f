import { randomUUID } from 'node:crypto';
import {
  ConflictError,
  CustosError,
  InvalidArgumentError,
  type Logger,
  type Transaction,
  UnavailableError,
} from '@custos/service-kit';
import type { ChainRecord } from '../chains/chain-types.js';
import {
  type ChainAdapter,
  type ChainEndpoint,
  ChainRpcError,
  type PreparedTransfer,
  type SignedTransfer,
  type TransferInput,
  type TransferOps,
  addressOn,
  insufficientFunds,
} from '../keys/chain-adapter.js';
import type { IntentScope } from '../intents/intent-context.js';
import type { KeyLoader } from '../keys/key-loader.js';
import { transferDetails } from './tx-fns.js';
import { ANSWER_MARGIN_MS, type SendBudget, signAndSend } from './tx-send.js';
import {
  type HeldClaim,
  InputsTakenError,
  OverspendError,
  type SpendCheck,
  type TxStore,
} from './tx-store.js';
import type { TxRecord } from './tx-types.js';

/**
 * How many times a transfer is prepared again when a parallel one took its inputs first (coin
 * selection is deterministic: the n-th of n parallel transfers may need n tries).
 */
const INPUT_RETRIES = 8;

/** The step name of prepare's chain reads (see onChain). */
export const PREPARE = 'building the transfer';

/** The family's transfer operations, or 400 naming `chain` when it has none. */
export function transfersOf(adapter: ChainAdapter, chain: ChainRecord): TransferOps {
  if (!adapter.transfers) {
    throw new InvalidArgumentError('chain', `transfers on ${chain.family} chains are not supported yet`);
  }
  return adapter.transfers;
}

/** The chain's node endpoint, or 503 when the install configured none. */
export function endpointOf(chain: ChainRecord, timeoutMs: number): ChainEndpoint {
  if (!chain.rpcUrl) {
    throw new UnavailableError(`the chain ${chain.name} has no RPC endpoint configured on this install`);
  }
  return { chain, url: chain.rpcUrl, timeoutMs };
}

/**
 * A chain call of a request: a node's refusal is the caller's to fix (422 `chain_rejected`), no
 * usable answer is 503 with nothing signed. The adapters' own refusals (400s) pass as they are.
 */
export async function onChain<T>(
  logger: Logger,
  chain: ChainRecord,
  what: string,
  f: () => Promise<T>,
): Promise<T> {
  try {
    return await f();
  } catch (err) {
    if (err instanceof ChainRpcError && err.rejected && err.status !== undefined && what === PREPARE) {
      // An HTTP 4xx answer to one of prepare's reads (a wrong rpc_url path, an unknown route): the
      // install's problem, never the agent's transaction refused.
      logger.warn({ chain: chain.name, err: err.message }, `${what}: the chain's node refused a read`);
      throw new UnavailableError(`the ${chain.name} node failed (${what}); nothing was signed`);
    }
    if (err instanceof ChainRpcError && err.rejected) {
      throw new CustosError('unprocessable', {
        detail: `the chain refused the transaction (${what}): ${err.message}`,
        type: 'chain_rejected',
      });
    }
    if (err instanceof ChainRpcError) {
      logger.warn({ chain: chain.name, err: err.message }, `${what}: the chain's node failed`);
      throw new UnavailableError(`the ${chain.name} node failed (${what}); nothing was signed`);
    }
    throw err;
  }
}

/**
 * Prepares a transfer (the adapter reads the chain), retrying when a parallel transfer of the key
 * took one of its inputs between the read and the record. `record` writes the row; it throws
 * InputsTakenError when the database refuses the inputs.
 */
async function prepareAndRecord(
  ops: TransferOps,
  scope: IntentScope,
  ep: ChainEndpoint,
  input: TransferInput,
  store: Pick<TxStore, 'inputsInUse'>,
  logger: Logger,
  beforeRecord: () => void | Promise<void>,
  record: (p: PreparedTransfer) => Promise<TxRecord>,
): Promise<{ prepared: PreparedTransfer; row: TxRecord }> {
  const from = addressOn(scope.adapter, scope.key, scope.chain);
  for (let attempt = 1; ; attempt++) {
    const prepared = await onChain(logger, scope.chain, PREPARE, () =>
      ops.prepare(
        {
          endpoint: ep,
          key: { address: scope.key.address, publicKey: scope.key.publicKey },
          from,
          inputsInUse: () => store.inputsInUse(scope.key.id, scope.chain.name),
        },
        input,
      ),
    );
    await beforeRecord();
    try {
      return { prepared, row: await record(prepared) };
    } catch (err) {
      if (err instanceof OverspendError) {
        throw insufficientFunds(
          `the key's ${err.asset === 'token' ? 'token balance' : 'balance'} available (${err.available}) does not cover this transfer with its other transfers not yet sent (${err.inFlight})`,
        );
      }
      if (!(err instanceof InputsTakenError)) throw err;
      if (attempt >= INPUT_RETRIES) {
        throw new ConflictError(
          "the key's other transfers in progress hold the outputs this one would spend; retry shortly",
          'value',
        );
      }
    }
  }
}

/** What a transfer spends, for the in-flight check (none when the adapter reports no `available`). */
export function spendOf(input: TransferInput, p: PreparedTransfer): SpendCheck | undefined {
  if (!p.available) return undefined;
  const token = input.tokenMint !== undefined && input.tokenMint !== '';
  return {
    native: (p.expectedFee ?? p.fee) + (token ? 0n : p.value),
    ...(token ? { token: p.value, tokenMint: input.tokenMint! } : {}),
    available: p.available,
  };
}

/** What a non-EVM submission needs. */
export interface TransferFlowDeps {
  store: TxStore;
  logger: Logger;
  /** The per-call timeout of node calls (EVM_RPC_TIMEOUT_MS). */
  rpcTimeoutMs: number;
  audit: (tx: Transaction, action: string, t: TxRecord, extra?: Record<string, unknown>) => Promise<string>;
  loader: Pick<KeyLoader, 'withKey'>;
}

/**
 * A transfer on a non-EVM chain, from the checked request to the node: prepared from the chain's
 * state, recorded `pending` with what it holds (inputs, sequence; Idempotency-Key linked), signed
 * with the agent's key (audited before anything leaves, fail-closed), broadcast, and then followed
 * by the watcher. Every end short of the node frees what the row held (as EVM gives its nonce back).
 */
export async function submitTransfer(
  deps: TransferFlowDeps,
  scope: IntentScope,
  input: TransferInput,
  held: HeldClaim | undefined,
  budget: SendBudget,
  onRecorded: () => void,
  resume?: { id: string; approve: () => Promise<void> },
): Promise<TxRecord> {
  const { store, logger } = deps;
  let approved = false;
  const ops = transfersOf(scope.adapter, scope.chain);
  const ep = endpointOf(scope.chain, deps.rpcTimeoutMs);
  const p = scope.agent;
  const from = addressOn(scope.adapter, scope.key, scope.chain);
  const outOfTime = () =>
    budget.cancelled() || budget.deadline - Date.now() < 2 * deps.rpcTimeoutMs + ANSWER_MARGIN_MS;
  const tooLate = () =>
    new UnavailableError(
      'the request ran out of time before the transaction was signed; nothing was signed or sent',
    );
  const { prepared, row } = await prepareAndRecord(
    ops,
    scope,
    ep,
    input,
    store,
    logger,
    async () => {
      if (outOfTime()) throw tooLate();
      // A resume uses its approval once, after the chain was read and before the row is recorded.
      if (resume && !approved) {
        await resume.approve();
        approved = true;
      }
    },
    (pr) =>
      store.insertTransfer(
        {
          id: resume?.id ?? randomUUID(),
          orgId: p.orgId,
          agentId: p.agentId,
          keyId: scope.key.id,
          chainName: scope.chain.name,
          chainId: scope.chain.chainId,
          family: scope.chain.family,
          fromAddress: from,
          toAddress: pr.to,
          valueWei: pr.value.toString(),
          data: '0x',
          txType: 0,
          fee: pr.fee.toString(),
          details: {
            ...transferDetails(input, pr.details),
            ...(pr.expectedFee !== undefined ? { expected_fee: pr.expectedFee.toString() } : {}),
          },
          expiryKind: pr.expiry?.kind ?? null,
          expiryValue: pr.expiry ? pr.expiry.value.toString() : null,
        },
        pr.sequenceFromChain !== undefined ? Number(pr.sequenceFromChain) : undefined,
        pr.inputs,
        held,
        spendOf(input, pr),
        resume?.id,
      ),
  );
  onRecorded();
  return signAndSend({
    store,
    logger,
    actor: p,
    row,
    budget,
    nodeTimeoutMs: deps.rpcTimeoutMs,
    chainName: scope.chain.name,
    audit: deps.audit,
    sign: () =>
      deps.loader.withKey(scope.key, (pk) =>
        signChecked(scope, ops, pk, prepared, row.nonce !== null ? BigInt(row.nonce) : undefined),
      ),
    send: (signed) => ops.broadcast(ep, signed),
    verdictOf: (err) => (err instanceof ChainRpcError ? err : undefined),
  });
}

/**
 * Signs with the opened key once it is known to be the scope's key (it derives the key's public
 * key): a vault that handed back another secret never signs for this agent's address.
 */
export function signChecked(
  scope: Pick<IntentScope, 'adapter' | 'chain' | 'key'>,
  ops: TransferOps,
  privateKey: Buffer,
  prepared: PreparedTransfer,
  sequence: bigint | undefined,
): SignedTransfer | Promise<SignedTransfer> {
  if (scope.adapter.derive(privateKey).publicKey !== scope.key.publicKey) {
    throw new Error('the opened key is not the signing key');
  }
  return ops.sign(privateKey, prepared, {
    chain: scope.chain,
    key: { address: scope.key.address, publicKey: scope.key.publicKey },
    ...(sequence !== undefined ? { sequence } : {}),
  });
}
