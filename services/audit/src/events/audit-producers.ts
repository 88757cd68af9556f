/**
 * Which service may record which actions, by the action's first part (its resource family):
 * each family belongs to the one service that owns that resource and writes its records
 * (`auditOf(caller, '<family>.<verb>', ...)` in services/<service>/src). A record arrives on
 * `audit.recorded.<producer>`, a subject only that producer's NATS user may publish to, so a
 * compromised service can at most forge records of its own resources: only vault-crypto records
 * `secret.read`, only identity `auth.login`. A test checks this table against the services' code.
 */
export const ACTION_PRODUCERS: Readonly<Record<string, string>> = {
  // identity: people, orgs, agents and their credentials
  account: 'identity',
  admin: 'identity',
  agent: 'identity',
  api_key: 'identity',
  auth: 'identity',
  email: 'identity',
  mfa: 'identity',
  org: 'identity',
  password: 'identity',
  reauth: 'identity',
  router_key: 'identity',
  user: 'identity',
  // vault-crypto: vaults, secrets, shares and org keys
  org_key: 'vault-crypto',
  secret: 'vault-crypto',
  share: 'vault-crypto',
  vault: 'vault-crypto',
  // policy: grants and IP rules
  ip_rule: 'policy',
  policy: 'policy',
  // webhook-dispatcher: webhooks
  webhook: 'webhook-dispatcher',
  // signer: the chains registry and agents' signing keys
  chain: 'signer',
  signing_key: 'signer',
  // signer: agents' transactions, a sub-family of `agent` (matched on the first two parts)
  'agent.transaction': 'signer',
  // signer: agents' sign intents (`agent.sign.<intent_type>`, `agent.sign.refused`)
  'agent.sign': 'signer',
  // signer: guardrail violations let through in `log` mode (SPEC §6 `guardrail_shadow.would_deny`)
  guardrail_shadow: 'signer',
  // signer: transfers refused by sanctions screening (`sanctions.blocked`)
  sanctions: 'signer',
  // signer: server-custody keys refused from a geofenced region (`custody.geofenced`)
  custody: 'signer',
  // approvals: approval requests, decisions, consensus execution, use and expiry
  approval: 'approvals',
};

/** The producer name of a record the audit service made itself (RecordEvent). */
export const SELF_PRODUCER = 'audit';

/** True when `producer` may record `action` (a dotted name, e.g. `secret.read`). */
export function mayRecord(producer: string, action: string): boolean {
  const dot = action.indexOf('.');
  if (dot < 1) return false;
  // A two-part sub-family (`agent.transaction`) wins over its first part (`agent`).
  const second = action.indexOf('.', dot + 1);
  const sub = second > dot + 1 ? action.slice(0, second) : '';
  if (sub && Object.prototype.hasOwnProperty.call(ACTION_PRODUCERS, sub))
    return ACTION_PRODUCERS[sub] === producer;
  const family = action.slice(0, dot);
  return (
    Object.prototype.hasOwnProperty.call(ACTION_PRODUCERS, family) && ACTION_PRODUCERS[family] === producer
  );
}
