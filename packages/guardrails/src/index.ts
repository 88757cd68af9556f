export {
  type GuardrailChain,
  type GuardrailRequest,
  type GuardrailSettings,
  type GuardrailTotals,
  type ReasonCode,
  type TransactionRequest,
  type TypedDataRequest,
  type Verdict,
  REASON_CODES,
  ZERO_TOTALS,
  domainMatches,
  enforcementOf,
  evaluateGuardrails,
  gasCostOf,
  sameAddress,
  toSmallest,
} from './evaluate.js';
export { type GuardrailChange, compareGuardrails } from './compare.js';
