import { randomUUID } from 'node:crypto';
import type { Principal } from '@custos/auth';
import { auditOf } from '@custos/events';
import { Transaction } from 'ethers';
import {
  CustosError,
  InvalidArgumentError,
  type Logger,
  PermissionDeniedError,
  UnavailableError,
} from '@custos/service-kit';
import { type RuleFacts, matchApprovalPolicy } from '@custos/approval-rules';
import type { SanctionsScreen } from '../screening/sanctions-screen.js';
import { evmRecipients, typedDataAddresses } from '../screening/screening-fns.js';
import { canonicalJson } from '@custos/service-kit';
import { failClosed } from '../audit/signer-audit.js';
import type { ApprovalGate, HeldTx } from '../approvals/approval-gate.js';
import {
  SIGN_ACTION,
  evmTxFacts,
  signIntentTarget,
  summaryOr,
  transferFacts,
  transferHeld,
} from '../approvals/approval-fns.js';
import { fillEvmTransaction, evmCapsOf } from '../evm/evm-fill.js';
import { type EvmRpc, type EvmRpcPool, EvmRpcError } from '../evm/evm-rpc.js';
import { buildEvmTransaction, signEvmTransaction } from '../evm/evm-tx.js';
import { INTENT_REFUSALS, type IntentContext, type IntentScope } from '../intents/intent-context.js';
import {
  parseDigest,
  parseIntentType,
  parseMessage,
  parseTxIntent,
  parseTypedData,
  personalMessageHash,
  signDigest,
} from './sign-fns.js';
import type { SignStore } from './sign-store.js';
import type { Admission, Guardrails } from '../guardrails/guardrails.js';
import { refuseTransferFieldsOnEvm } from '../transactions/tx-fns.js';
import { addressOn } from '../keys/chain-adapter.js';
import { signTransferOnly } from './sign-transfer.js';
import type { TxStore } from '../transactions/tx-store.js';
import {
  type IntentType,
  NO_SIGN_BUDGET,
  type SignBudget,
  type SignIntentInput,
  type SignIntentResult,
} from './sign-types.js';

import { RECORD_MARGIN_MS } from './sign-types.js';

export { RECORD_MARGIN_MS };

/**
 * The audit action of a signature of each intent type (a refusal is `agent.sign.refused`), spelled
 * out so that the audit service's scan of what signer records finds them.
 */
export const SIGN_ACTIONS = {
  personal_sign: 'agent.sign.personal_sign',
  typed_data: 'agent.sign.typed_data',
  eip712_digest: 'agent.sign.eip712_digest',
  transaction: 'agent.sign.transaction',
} as const satisfies Record<IntentType, `agent.sign.${IntentType}`>;

/**
 * The approval step of a sign request: given the intent's facts (and, for a transaction, what the
 * approver's preview is computed from), returns the approval used (a resume), undefined when no
 * rule asks for one, or throws AwaitingApproval after asking humans.
 */
type ApprovalStep = (
  facts: RuleFacts & { from?: string },
  preview: HeldTx | undefined,
  /** What the approver is shown of a message or typed data (hashes, the text when readable). */
  details?: Record<string, unknown>,
) => Promise<string | undefined>;

/**
 * Characters that reorder or hide text: C1 controls, soft hyphen, combining grapheme joiner, Arabic
 * letter mark, Mongolian vowel separator, zero-width characters, bidi marks, embeddings, overrides
 * and isolates, invisible operators, the BOM, and tag characters.
 */
const HIDDEN =
  /\u034F|[\u0080-\u009F\u00AD\u061C\u180E\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF\u{E0000}-\u{E007F}]/gu;

const marker = (ch: string) => `⟨U+${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}⟩`;

/**
 * A message's text for the approver when it is printable UTF-8 (at most 2,000 characters), else
 * null. Each character that would reorder or hide text is shown as a visible marker (`⟨U+202E⟩`)
 * in its place, and `altered` says so, so the approver sees both the order and that it was there.
 */
export function readableText(bytes: Uint8Array): { text: string; altered: boolean } | null {
  const decoded = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true }).decode(bytes);
  // eslint-disable-next-line no-control-regex
  if (decoded.includes('\uFFFD') || /[\u0000-\u0008\u000E-\u001F\u007F]/.test(decoded)) return null;
  const text = decoded.replace(HIDDEN, marker);
  const chars = Array.from(text);
  return {
    text: chars.length > 2000 ? `${chars.slice(0, 2000).join('')}…` : text,
    altered: text !== decoded,
  };
}

/** What the approver is shown of a message's text (see readableText). */
function messageTextOf(bytes: Uint8Array): Record<string, unknown> {
  const r = readableText(bytes);
  if (!r) return { message_text: null };
  return { message_text: r.text, ...(r.altered ? { message_text_altered: true } : {}) };
}

/** Ends a sign request `awaiting_approval` (not an error: the answer is 202 with the approval). */
class AwaitingApproval extends Error {
  constructor(readonly result: SignIntentResult) {
    super('awaiting approval');
    this.name = 'AwaitingApproval';
  }
}

/**
 * Sign intents of agents (`POST /v1/agents/{id}/sign`): a signature over an EIP-191 message,
 * EIP-712 typed data or a raw digest, or a transaction signed and not broadcast. Every request
 * passes the Intents API checks of IntentContext first; every refusal is audited
 * `agent.sign.refused`; every signature is audited `agent.sign.<intent_type>` and the record is
 * committed before the signature is answered (fail-closed: no record, no signature).
 */
export class SignService {
  constructor(
    private readonly deps: {
      intents: Pick<IntentContext, 'open' | 'audited' | 'loader'>;
      store: SignStore;
      rpc: Pick<EvmRpcPool, 'forChain'>;
      logger: Logger;
      /** Inputs held by the key's transactions (UTXO chains): a sign-only transfer avoids them. */
      inputs: Pick<TxStore, 'inputsInUse'>;
      /** EVM_RPC_TIMEOUT_MS: the per-call timeout of non-EVM node calls. */
      rpcTimeoutMs?: number;
      /** The approval gate (issue 19); absent: a matching approval rule is 503, nothing signed. */
      gate?: ApprovalGate;
      /** The agent's guardrails (issue 20): transactions and EIP-712 domains, before the key is used. */
      guardrails?: Guardrails;
      /** Sanctions screening (issue 20); absent: an agent with screening on is 503, nothing signed. */
      sanctions?: Pick<SanctionsScreen, 'screen'>;
    },
  ) {}

  /**
   * Screens what a signature would pay or empower (a transaction's recipients, a typed-data
   * document's addresses) by the agent's `address_screening_policy.mode`. A sign intent is not held
   * for a human over a sanctions hit: under `approve` as under `deny` a hit is 403
   * `sanctions_blocked`, audited, nothing signed (the agent could broadcast what it gets).
   */
  private async screen(scope: IntentScope, to: readonly string[]): Promise<void> {
    const mode = scope.settings.addressScreeningPolicy?.mode;
    if (!mode || mode === 'off') return;
    if (!this.deps.sanctions)
      throw new UnavailableError('address screening is not configured on this signer');
    await this.deps.sanctions.screen(scope.agent, scope.agent.agentId, 'deny', {
      family: scope.chain.family,
      chain: scope.chain.name,
      to,
    });
  }

  /**
   * The approval step of one sign request, run with the intent's facts just before the key is used:
   * a rule of the agent's policy that matches (and no `approval_id`) asks humans and ends the
   * request `awaiting_approval` (AwaitingApproval, nothing signed); an `approval_id` is used once
   * for this very body (403 `approval_required` otherwise), and the rule is not evaluated again.
   */
  private approvalStep(
    scope: IntentScope,
    intent: IntentType,
    input: SignIntentInput,
    budget: SignBudget,
  ): ApprovalStep {
    return async (facts, preview, details = {}) => {
      const gate = this.deps.gate;
      const target = () => {
        const { approvalId: _a, canonicalBody: _c, agentId: _g, ...body } = input;
        return signIntentTarget(input.canonicalBody || canonicalJson(body));
      };
      if (input.approvalId) {
        if (!gate) throw new UnavailableError('approvals are not configured on this signer');
        // The approval is used once: not for a request whose caller has already given up.
        this.inTime(budget, 0, 'using the approval');
        await gate.consume(scope, {
          approvalId: input.approvalId,
          action: SIGN_ACTION,
          targetType: 'sign_intent',
          targetId: target(),
        });
        return input.approvalId.toLowerCase();
      }
      const full: RuleFacts = {
        action: SIGN_ACTION,
        intentType: intent,
        chain: scope.chain.name,
        ...(scope.chain.family === 'evm' ? { chainId: scope.chain.chainId.toString() } : {}),
        ...facts,
      };
      // Matched here, gate or not: a rule that matches with no gate wired is 503, never skipped.
      const match = matchApprovalPolicy(scope.settings.actionApprovalPolicy, full);
      if (!match) return undefined;
      if (!gate)
        throw new UnavailableError('approvals are not configured on this signer; nothing was signed');
      const targetId = target();
      const p = preview
        ? await gate.preview(scope, preview, match, input.summary)
        : {
            intent_type: intent,
            chain: scope.chain.name,
            chain_id: scope.chain.chainId.toString(),
            from: facts.from ?? scope.key.address,
            ...details,
            rule: match.ruleJson,
            risk_tier: match.tier,
            summary: input.summary ?? null,
            flags: [],
          };
      const approval = await gate!
        .create(scope, {
          action: SIGN_ACTION,
          targetType: 'sign_intent',
          targetId,
          summary: summaryOr(input.summary, `Sign ${intent} on ${scope.chain.name}`),
          payload: { intent_type: intent, chain: scope.chain.name, request_hash: targetId, ...details },
          preview: p,
          match,
        })
        .catch((err: unknown) => {
          this.deps.logger.warn({ err: String(err) }, 'the approval of a sign intent could not be asked for');
          // gate.create answers 400 (the summary refused), 500 (the preview refused) or 503.
          throw err instanceof CustosError
            ? err
            : new UnavailableError('the approval could not be requested; nothing was signed');
        });
      const record = auditOf(
        scope.agent,
        'agent.sign.awaiting_approval',
        { type: 'agent', id: scope.agent.agentId },
        {
          ...this.scopeDetails(scope, intent),
          approval_id: approval.id,
          target_id: targetId,
          risk_tier: match.tier,
          rule_index: match.ruleIndex,
        },
      );
      await failClosed(this.deps.logger, record.action, () => this.deps.store.recordSignature(record));
      throw new AwaitingApproval({
        ...this.empty(scope, intent, { signature: '', from: facts.from ?? scope.key.address }),
        status: 'awaiting_approval',
        approvalId: approval.id,
      });
    };
  }

  /**
   * Signs one intent of agent `input.agentId`, which must be the caller, within `budget`: a request
   * whose caller has given up (deadline passed or call cancelled) before the key is used, or with
   * less than RECORD_MARGIN_MS left once signed, is 503 with nothing signed or recorded.
   */
  async sign(
    p: Principal,
    input: SignIntentInput,
    budget: SignBudget = NO_SIGN_BUDGET,
  ): Promise<SignIntentResult> {
    return this.deps.intents.audited(p, 'agent.sign', input.agentId, async () => {
      const scope = await this.deps.intents.open(p, input.agentId, input.chain);
      const intent = parseIntentType(input.intentType);
      const step = this.approvalStep(scope, intent, input, budget);
      try {
        return await this.signIntent(scope, intent, input, budget, step);
      } catch (err) {
        if (err instanceof AwaitingApproval) return err.result;
        throw err;
      }
    });
  }

  private async signIntent(
    scope: IntentScope,
    intent: IntentType,
    input: SignIntentInput,
    budget: SignBudget,
    step: ApprovalStep,
  ): Promise<SignIntentResult> {
    if (scope.chain.family !== 'evm') {
      if (intent !== 'transaction') {
        throw new InvalidArgumentError(
          'intent_type',
          `only \`transaction\` intents are signed on ${scope.chain.family} chains (${intent} is EVM's)`,
        );
      }
      // A signed transfer can be broadcast by the agent: it counts on the day's totals like a
      // submitted one (reserved before the key is used, given back only when nothing was signed).
      let admission: Admission | undefined;
      return this.unreservedOnError(
        () => admission,
        () =>
          signTransferOnly(
            {
              store: this.deps.store,
              inputs: this.deps.inputs,
              loader: this.deps.intents.loader,
              logger: this.deps.logger,
              rpcTimeoutMs: this.deps.rpcTimeoutMs ?? 10_000,
            },
            scope,
            input,
            {
              inTime: (marginMs, what) => this.inTime(budget, marginMs, what),
              auditDetails: this.scopeDetails(scope, 'transaction'),
              // The facts of the transfer as the chain's adapter parsed it (its decimals filled in).
              beforeSign: async (t) => {
                const from = addressOn(scope.adapter, scope.key, scope.chain);
                const facts = transferFacts(scope.chain, t, {});
                await this.screen(scope, [t.to]);
                admission = await this.deps.guardrails?.admitTransaction(
                  scope,
                  { to: t.to, value: facts.valueWei ?? 0n },
                  { kind: 'sign_only', reserve: true },
                );
                return step({ ...facts, from }, transferHeld(from, t, facts), {
                  to: t.to,
                  value: t.value,
                  ...(t.tokenMint ? { token_mint: t.tokenMint } : {}),
                });
              },
            },
          ),
      );
    }
    // The other families' transfer fields mean nothing here: refused, never signed without them.
    refuseTransferFieldsOnEvm(input);
    switch (intent) {
      case 'personal_sign':
        return this.personalSign(scope, input, budget, step);
      case 'typed_data':
        return this.typedData(scope, input, budget, step);
      case 'eip712_digest':
        return this.digest(scope, input, budget, step);
      case 'transaction':
        return this.transaction(scope, input, budget, step);
    }
  }

  private async personalSign(
    scope: IntentScope,
    input: SignIntentInput,
    budget: SignBudget,
    step: ApprovalStep,
  ): Promise<SignIntentResult> {
    if (!scope.settings.messageSigningEnabled) {
      throw new PermissionDeniedError(
        "message signing (personal_sign) is not enabled for this agent: an owner sets the agent's message_signing_enabled",
        { type: INTENT_REFUSALS.messageSigningDisabled },
      );
    }
    const message = parseMessage(input.message);
    const messageHash = personalMessageHash(message);
    const approvalId = await step({}, undefined, {
      message_hash: messageHash,
      message_bytes: message.length,
      ...messageTextOf(message),
    });
    const s = await this.signHash(scope, messageHash, budget);
    await this.audit(scope, 'agent.sign.personal_sign', {
      message_hash: messageHash,
      message_bytes: message.length,
      ...(approvalId ? { approval_id: approvalId } : {}),
    });
    return { ...this.empty(scope, 'personal_sign', s), messageHash, approvalId: approvalId ?? null };
  }

  private async typedData(
    scope: IntentScope,
    input: SignIntentInput,
    budget: SignBudget,
    step: ApprovalStep,
  ): Promise<SignIntentResult> {
    const { doc, hash } = parseTypedData(input.typedDataJson, scope.chain.chainId);
    // eip712_domain_allowlist / eip712_default_policy (issue 20); a domain chainId of another chain
    // is refused above already (400 naming typed_data.domain.chainId) and by the evaluator.
    const dom = doc.domain;
    // The document's addresses (a permit's spender, a transfer authorization's recipient …).
    await this.screen(scope, typedDataAddresses(doc));
    await this.deps.guardrails?.judgeTypedData(scope, {
      ...(dom.name != null ? { name: String(dom.name) } : {}),
      ...(dom.version != null ? { version: String(dom.version) } : {}),
      ...(dom.chainId != null ? { chainId: String(dom.chainId) } : {}),
      ...(dom.verifyingContract != null ? { verifyingContract: String(dom.verifyingContract) } : {}),
    });
    const approvalId = await step({}, undefined, {
      typed_data_hash: hash,
      primary_type: doc.primaryType.slice(0, 100),
      domain: {
        ...(doc.domain.name != null ? { name: String(doc.domain.name).slice(0, 100) } : {}),
        ...(doc.domain.chainId != null ? { chain_id: String(doc.domain.chainId) } : {}),
        ...(doc.domain.verifyingContract != null
          ? { verifying_contract: String(doc.domain.verifyingContract) }
          : {}),
      },
    });
    const s = await this.signHash(scope, hash, budget);
    const d = doc.domain;
    await this.audit(scope, 'agent.sign.typed_data', {
      typed_data_hash: hash,
      primary_type: doc.primaryType.slice(0, 100),
      domain: {
        ...(d.name != null ? { name: String(d.name).slice(0, 100) } : {}),
        ...(d.version != null ? { version: String(d.version).slice(0, 40) } : {}),
        ...(d.chainId != null ? { chain_id: String(d.chainId) } : {}),
        ...(d.verifyingContract != null ? { verifying_contract: String(d.verifyingContract) } : {}),
      },
      ...(approvalId ? { approval_id: approvalId } : {}),
    });
    return { ...this.empty(scope, 'typed_data', s), typedDataHash: hash, approvalId: approvalId ?? null };
  }

  private async digest(
    scope: IntentScope,
    input: SignIntentInput,
    budget: SignBudget,
    step: ApprovalStep,
  ): Promise<SignIntentResult> {
    if (!scope.settings.rawSigningEnabled) {
      throw new PermissionDeniedError(
        "raw digest signing (eip712_digest) is not enabled for this agent: an owner sets the agent's raw_signing_enabled",
        { type: INTENT_REFUSALS.rawSigningDisabled },
      );
    }
    const hash = parseDigest(input.hash);
    const approvalId = await step({}, undefined, { typed_data_hash: hash });
    const s = await this.signHash(scope, hash, budget);
    await this.audit(scope, 'agent.sign.eip712_digest', {
      typed_data_hash: hash,
      ...(approvalId ? { approval_id: approvalId } : {}),
    });
    return { ...this.empty(scope, 'eip712_digest', s), typedDataHash: hash, approvalId: approvalId ?? null };
  }

  private async transaction(
    scope: IntentScope,
    input: SignIntentInput,
    budget: SignBudget,
    step: ApprovalStep,
  ): Promise<SignIntentResult> {
    const f = parseTxIntent(input, scope.chain.nativeDecimals);
    const from = scope.key.address;
    const rpc = this.lazyRpc(scope);
    const filled = await this.onChain(() =>
      fillEvmTransaction(
        rpc,
        {
          chainId: scope.chain.chainId,
          from,
          to: f.to,
          value: f.value,
          data: f.data,
          type: f.type,
          ...(f.gasLimit !== undefined ? { gasLimit: f.gasLimit } : {}),
          ...(f.maxFeePerGas !== undefined ? { maxFeePerGas: f.maxFeePerGas } : {}),
          ...(f.maxPriorityFeePerGas !== undefined ? { maxPriorityFeePerGas: f.maxPriorityFeePerGas } : {}),
          ...(f.gasPrice !== undefined ? { gasPrice: f.gasPrice } : {}),
        },
        evmCapsOf(scope.settings),
      ),
    );
    const nonce = f.nonce ?? (await this.defaultNonce(scope, rpc));
    const { clamped, ...fields } = filled;
    const unsigned = buildEvmTransaction({ ...fields, nonce });
    // A signed transaction can be broadcast by the agent: it counts on the day's totals (given back
    // only when nothing is answered: awaiting approval, refused, out of time, not recorded).
    const fee = fields.type === 2 ? fields.maxFeePerGas : fields.gasPrice;
    await this.screen(scope, evmRecipients(fields.to, fields.data));
    const admission = await this.deps.guardrails?.admitTransaction(
      scope,
      {
        to: fields.to,
        value: fields.value,
        data: fields.data,
        gasLimit: fields.gasLimit,
        ...(fee !== undefined ? { maxFeePerGas: fee } : {}),
      },
      { kind: 'sign_only', reserve: true },
    );
    return this.unreservedOnError(
      () => admission,
      () => this.signTransaction(scope, budget, step, { from, nonce, clamped, fields, unsigned }),
    );
  }

  /** The rest of a sign-only EVM transaction once judged: approval, signature, record. */
  private async signTransaction(
    scope: IntentScope,
    budget: SignBudget,
    step: ApprovalStep,
    o: {
      from: string;
      nonce: number;
      clamped: string[];
      fields: Omit<Awaited<ReturnType<typeof fillEvmTransaction>>, 'clamped'>;
      unsigned: ReturnType<typeof buildEvmTransaction>;
    },
  ): Promise<SignIntentResult> {
    const { from, nonce, clamped, fields, unsigned } = o;
    const approvalId = await step(
      evmTxFacts(scope.chain, { to: fields.to, value: fields.value, data: fields.data }, {}),
      {
        from,
        to: fields.to ?? '',
        valueWei: fields.value,
        data: fields.data,
      },
    );
    // The chain calls above may take EVM_RPC_TIMEOUT_MS each: signed and stored only in time.
    this.inTime(budget, 0, 'signing');
    const signed = await this.deps.intents.loader.withKey(scope.key, (pk) =>
      signEvmTransaction(pk, unsigned),
    );
    this.inTime(budget, RECORD_MARGIN_MS, 'recording the transaction');
    if (signed.from !== from) throw new Error("the opened key is not the signing key's address");
    const id = randomUUID();
    const row = {
      id,
      orgId: scope.agent.orgId,
      agentId: scope.agent.agentId,
      keyId: scope.key.id,
      chainName: scope.chain.name,
      chainId: scope.chain.chainId,
      fromAddress: from,
      toAddress: fields.to,
      valueWei: fields.value,
      data: fields.data,
      nonce,
      gasLimit: fields.gasLimit,
      txType: fields.type,
      maxFeePerGas: fields.maxFeePerGas ?? null,
      maxPriorityFeePerGas: fields.maxPriorityFeePerGas ?? null,
      gasPrice: fields.gasPrice ?? null,
      txHash: signed.txHash,
      signedTx: signed.signedTx,
    };
    const details = {
      ...this.scopeDetails(scope, 'transaction'),
      tx_id: id,
      tx_hash: signed.txHash,
      tx_type: fields.type,
      nonce,
      to: fields.to,
      value_wei: fields.value.toString(),
      gas_limit: fields.gasLimit.toString(),
      ...(fields.type === 2
        ? {
            max_fee_per_gas: fields.maxFeePerGas?.toString(),
            max_priority_fee_per_gas: fields.maxPriorityFeePerGas?.toString(),
          }
        : { gas_price: fields.gasPrice?.toString() }),
      ...(clamped.length ? { clamped_to_caps: clamped } : {}),
      ...(approvalId ? { approval_id: approvalId } : {}),
    };
    const record = auditOf(
      scope.agent,
      'agent.sign.transaction',
      { type: 'agent', id: scope.agent.agentId },
      details,
    );
    await failClosed(this.deps.logger, record.action, () => this.deps.store.recordSignOnly(row, record));
    return {
      intentType: 'transaction',
      chain: scope.chain.name,
      from,
      signature: signatureOf(signed.signedTx) ?? '',
      signedTx: signed.signedTx,
      txHash: signed.txHash,
      messageHash: null,
      typedDataHash: null,
      txType: fields.type,
      status: 'sign_only',
      nonce,
      transactionId: id,
      approvalId: approvalId ?? null,
    };
  }

  /**
   * The nonce of a sign-only transaction given none: the chain's pending nonce of the key's address,
   * or the Transactions API's next nonce for the key and chain when that is ahead (read only, nothing
   * reserved), so a sign-only transaction does not reuse a nonce a submitted one holds.
   */
  private async defaultNonce(scope: IntentScope, rpc: EvmRpc): Promise<number> {
    const [pending, stored] = await Promise.all([
      this.onChain(() => rpc.pendingNonce(scope.key.address)),
      this.deps.store.nextNonce(scope.key.id, scope.chain.chainId),
    ]);
    return Math.max(pending, stored ?? 0);
  }

  /** Signs a 32-byte hash with the scope's key, within the caller's time (see `inTime`). */
  private async signHash(
    scope: IntentScope,
    hash: string,
    budget: SignBudget,
  ): Promise<{ signature: string; from: string }> {
    this.inTime(budget, 0, 'signing');
    const s = await this.deps.intents.loader.withKey(scope.key, (pk) =>
      signDigest(pk, hash, scope.key.address),
    );
    this.inTime(budget, RECORD_MARGIN_MS, 'recording the signature');
    return s;
  }

  /**
   * Refuses to go on (503, nothing signed or recorded) when the caller has given up or fewer than
   * `marginMs` are left before its deadline: the gateway would answer 503 while signer went on, and
   * a retry would sign (and for a transaction, store and announce) the intent a second time.
   */
  /**
   * Runs the signing of a judged transaction; when it ends without a signature answered (awaiting
   * approval, refused, out of time, not recorded) its guardrail reservation is given back.
   */
  private async unreservedOnError<T>(
    admission: () => Admission | undefined,
    f: () => Promise<T>,
  ): Promise<T> {
    try {
      return await f();
    } catch (err) {
      await this.deps.guardrails?.release(admission(), 'nothing was signed');
      throw err;
    }
  }

  private inTime(budget: SignBudget, marginMs: number, step: string): void {
    if (budget.cancelled() || budget.deadline - Date.now() < marginMs) {
      this.deps.logger.warn({ step }, 'sign intent: the caller ran out of time; nothing signed');
      throw new UnavailableError(
        `the request ran out of time before ${step}; nothing was signed or recorded`,
      );
    }
  }

  /** What every signature's audit record names: the chain, the key and its address, never the key. */
  private scopeDetails(scope: IntentScope, intent: IntentType): Record<string, unknown> {
    return {
      intent_type: intent,
      chain: scope.chain.name,
      chain_id: Number(scope.chain.chainId),
      from: scope.key.address,
      key_id: scope.key.id,
      key_version: scope.key.keyVersion,
    };
  }

  /** Commits the signature's audit record; when it cannot be, the answer is 503 and no signature. */
  private async audit(
    scope: IntentScope,
    action: (typeof SIGN_ACTIONS)[Exclude<IntentType, 'transaction'>],
    extra: Record<string, unknown>,
  ): Promise<void> {
    const intent = action.slice('agent.sign.'.length) as IntentType;
    const record = auditOf(
      scope.agent,
      action,
      { type: 'agent', id: scope.agent.agentId },
      { ...this.scopeDetails(scope, intent), ...extra },
    );
    await failClosed(this.deps.logger, record.action, () => this.deps.store.recordSignature(record));
  }

  private empty(
    scope: IntentScope,
    intent: IntentType,
    s: { signature: string; from: string },
  ): SignIntentResult {
    return {
      intentType: intent,
      chain: scope.chain.name,
      from: s.from,
      signature: s.signature,
      signedTx: null,
      txHash: null,
      messageHash: null,
      typedDataHash: null,
      txType: null,
      status: null,
      nonce: null,
      transactionId: null,
    };
  }

  /** The chain's JSON-RPC, reached only when a figure is missing (a fully given transaction needs none). */
  private lazyRpc(scope: IntentScope): EvmRpc {
    const rpc = () => this.deps.rpc.forChain(scope.chain);
    return {
      feeData: () => rpc().feeData(),
      estimateGas: (c) => rpc().estimateGas(c),
      call: (c) => rpc().call(c),
      pendingNonce: (a) => rpc().pendingNonce(a),
      sendRawTransaction: () => Promise.reject(new Error('a sign intent never broadcasts')),
      receipt: (h) => rpc().receipt(h),
    };
  }

  /**
   * Runs a call to the chain's node: a node that cannot be reached is a 503; one that refuses the
   * request (e.g. insufficient funds for the gas estimate) a 422 `chain_rejected` with its reason.
   */
  private async onChain<T>(step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (err) {
      if (err instanceof CustosError) throw err;
      if (err instanceof EvmRpcError) {
        if (err.rejected) {
          throw new CustosError('unprocessable', {
            detail: `the chain's node refused the transaction: ${err.message}`,
            type: 'chain_rejected',
          });
        }
        this.deps.logger.warn({ err: err.message }, 'sign intent: chain node unreachable');
        throw new UnavailableError("the chain's node could not be reached; try again");
      }
      throw err;
    }
  }
}

/** The 65-byte signature of a serialized signed transaction. */
function signatureOf(signedTx: string): string | undefined {
  return Transaction.from(signedTx).signature?.serialized;
}
