import { createHash } from 'node:crypto';
import { type GuardrailChange, type GuardrailSettings, compareGuardrails } from '@custos/guardrails';
import { GUARDRAIL_SETTINGS, SETTING_NAMES } from './agent-fns.js';
import { settingsToStored } from './agent-settings-fns.js';
import type { AgentSettings } from './agent-types.js';

export type { GuardrailChange } from '@custos/guardrails';

type Json = Record<string, unknown>;

/** -1 stricter, 0 equal, 1 looser, 2 neither. */
type Step = -1 | 0 | 1 | 2;

/**
 * The limits of an agent's settings as @custos/guardrails reads them (the proto Agent's shape:
 * int64 as decimal strings, absent for no limit).
 */
export function guardrailSettingsOf(s: AgentSettings): GuardrailSettings {
  const opt = <T>(v: T | null): T | undefined => (v === null ? undefined : v);
  const int = (v: number | null) => (v === null ? undefined : String(v));
  return {
    executionGuardrails: s.executionGuardrails,
    perChainGuardrails: Object.fromEntries(
      Object.entries(s.perChainGuardrails).map(([chain, g]) => [
        chain,
        {
          maxValue: g.maxValue,
          dailyLimit: g.dailyLimit,
          toAllowlist: g.toAllowlist ?? [],
          gasDailyBudgetNative: g.gasDailyBudgetNative,
        },
      ]),
    ),
    txMaxValueEth: opt(s.txMaxValueEth),
    txDailyLimitEth: opt(s.txDailyLimitEth),
    txMaxPerDay: int(s.txMaxPerDay),
    maxFeePerGasGwei: opt(s.maxFeePerGasGwei),
    maxGasLimit: int(s.maxGasLimit),
    txToAllowlist: s.txToAllowlist,
    txAllowedChains: s.txAllowedChains,
    eip712DomainAllowlist: s.eip712DomainAllowlist,
    eip712DefaultPolicy: s.eip712DefaultPolicy,
  };
}

const flag = (before: boolean, after: boolean, looserWhen: boolean): Step =>
  before === after ? 0 : after === looserWhen ? 1 : -1;

const SCREENING_RANK: Record<string, number> = { off: 0, approve: 1, deny: 2 };

function cap(before: number | null, after: number | null): Step {
  if (before === after) return 0;
  if (before === null) return -1;
  if (after === null) return 1;
  return after < before ? -1 : 1;
}

/**
 * The guardrail settings compareGuardrails does not read, step by step: the signing paths that are
 * open (enabling one loosens), the TEE requirements (dropping one loosens), the screening mode
 * (`off` < `approve` < `deny`), the stablecoin cap, and the approval rules (adding rules where
 * there were none tightens, removing them all loosens, any other change is neither).
 */
function otherSteps(a: AgentSettings, b: AgentSettings): Step[] {
  const rank = (s: AgentSettings) => SCREENING_RANK[s.addressScreeningPolicy.mode] ?? -1;
  const ra = rank(a);
  const rb = rank(b);
  const policy = (s: AgentSettings) => (s.actionApprovalPolicy?.rules.length ? s.actionApprovalPolicy : null);
  const pa = policy(a);
  const pb = policy(b);
  const policyStep: Step =
    JSON.stringify(settingsToStored({ ...a, actionApprovalPolicy: pa })['action_approval_policy']) ===
    JSON.stringify(settingsToStored({ ...b, actionApprovalPolicy: pb })['action_approval_policy'])
      ? 0
      : pa === null
        ? -1
        : pb === null
          ? 1
          : 2;
  return [
    flag(a.intentsApiEnabled, b.intentsApiEnabled, true),
    flag(a.messageSigningEnabled, b.messageSigningEnabled, true),
    flag(a.rawSigningEnabled, b.rawSigningEnabled, true),
    flag(a.executionIntentsEnabled, b.executionIntentsEnabled, true),
    flag(a.intentsRequireTee, b.intentsRequireTee, false),
    flag(a.executionRequireTee, b.executionRequireTee, false),
    ra < 0 || rb < 0 ? 2 : (Math.sign(ra - rb) as Step) || 0,
    cap(a.usdcDailyLimitUsd, b.usdcDailyLimitUsd),
    cap(a.usdDailyLimitUsd, b.usdDailyLimitUsd),
    policyStep,
  ];
}

const STEP_OF: Record<GuardrailChange, Step[]> = { same: [], narrow: [-1], widen: [1], mixed: [2] };

/**
 * How an edit moves an agent's guardrails: compareGuardrails (@custos/guardrails) over the limits
 * it reads, combined with the other guardrail settings (otherSteps): `narrow` when nothing loosens
 * and something tightens, `widen` when nothing tightens and something loosens, `same` when nothing
 * moves, `mixed` otherwise. Pure.
 */
export function compareAgentGuardrails(before: AgentSettings, after: AgentSettings): GuardrailChange {
  const steps = [
    ...STEP_OF[compareGuardrails(guardrailSettingsOf(before), guardrailSettingsOf(after))],
    ...otherSteps(before, after),
  ];
  const stricter = steps.includes(-1);
  const looser = steps.includes(1);
  if (steps.includes(2) || (stricter && looser)) return 'mixed';
  if (stricter) return 'narrow';
  if (looser) return 'widen';
  return 'same';
}

/** The guardrail fields of settings by their API names (as stored): a revision's before and after. */
export function guardrailJson(s: AgentSettings): Json {
  const stored = settingsToStored(s);
  return Object.fromEntries(
    GUARDRAIL_SETTINGS.map((k) => [SETTING_NAMES[k], stored[SETTING_NAMES[k]] ?? null]),
  );
}

/** JSON with object keys sorted at every level: one text per value. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const entries = Object.entries(v as Json)
      .filter(([, x]) => x !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v ?? null);
}

/**
 * What an approval of a guardrail change is bound to: hex SHA-256 of the canonical JSON of the
 * agent id and its guardrail fields before and after the edit. Another agent, another resulting
 * guardrail set, or any guardrail change since the approval was raised (a narrowing included: an
 * old approval never undoes it) hash differently.
 */
export function guardrailChangeHash(agentId: string, before: Json, after: Json): string {
  return createHash('sha256')
    .update(canonicalJson({ agent_id: agentId.toLowerCase(), before, after }))
    .digest('hex');
}

/** Whether an edit that moves guardrails this way waits for an approval when the setting is on. */
export function needsApproval(change: GuardrailChange): boolean {
  return change === 'widen' || change === 'mixed';
}
