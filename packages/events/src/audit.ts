import { currentRequestContext } from '@custos/service-kit';
import type { Executor } from './outbox.js';
import { writeEvent } from './outbox.js';
import type { OutboxTable } from './tables.js';

/** Who performed an audited action. */
export type AuditActorType = 'user' | 'agent' | 'system' | 'anonymous';

/** One audited action, as the acting service describes it. */
export interface AuditRecordInput {
  orgId: string;
  actorType: AuditActorType;
  /** The user or agent id; null for an anonymous caller (a failed login, a share link). */
  actorId: string | null;
  /** Dotted action name, e.g. `secret.read` (spec §7 names some). */
  action: string;
  resourceType: string;
  resourceId: string | null;
  /** Facts about the action. Never a secret value: keys that could hold one are refused. */
  metadata?: Record<string, unknown>;
  /** Defaults to the request context's client address and request id. */
  clientIp?: string | null;
  requestId?: string | null;
}

/** The `data` of an `audit.recorded` event: what the audit service chains. */
export interface AuditRecordData {
  org_id: string;
  actor_type: AuditActorType;
  actor_id: string | null;
  action: string;
  resource_type: string;
  resource_id: string | null;
  metadata: Record<string, unknown>;
  client_ip: string | null;
  request_id: string | null;
  occurred_at: string;
}

// Metadata keys that name a secret-bearing value. A record carrying one is a programming error and
// the action fails (fail-closed) rather than writing a secret into the append-only log.
const FORBIDDEN_KEY =
  /^(value|values|secret|secrets|password|new_password|current_password|passphrase|plaintext|ciphertext|private_key|api_key|token|access_token|refresh_token|id_token|code|recovery_codes?|totp_secret|signing_secret)$/i;

function assertNoSecrets(value: unknown, path: string): void {
  if (Array.isArray(value)) {
    value.forEach((v, i) => assertNoSecrets(v, `${path}[${i}]`));
    return;
  }
  if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (FORBIDDEN_KEY.test(k)) throw new Error(`audit metadata may not carry "${path}${k}"`);
      assertNoSecrets(v, `${path}${k}.`);
    }
  }
}

/** The `data` an audit record travels as; exported for tests and for services that append directly. */
export function auditRecordData(record: AuditRecordInput, now = new Date()): AuditRecordData {
  const metadata = record.metadata ?? {};
  assertNoSecrets(metadata, '');
  const ctx = currentRequestContext();
  return {
    org_id: record.orgId,
    actor_type: record.actorType,
    actor_id: record.actorId,
    action: record.action,
    resource_type: record.resourceType,
    resource_id: record.resourceId,
    metadata,
    client_ip: record.clientIp !== undefined ? record.clientIp : (ctx?.clientIp ?? null),
    request_id: record.requestId !== undefined ? record.requestId : (ctx?.requestId ?? null),
    occurred_at: now.toISOString(),
  };
}

/**
 * Writes an audit record into the caller's transaction (ARCHITECTURE §2: audit is fail-closed).
 * It travels as an `audit.recorded` event through the service's outbox to the audit service,
 * which chains it; if this insert fails, the caller's transaction — and so the action — fails.
 */
export async function writeAudit(
  tx: Executor,
  table: OutboxTable,
  record: AuditRecordInput,
): Promise<string> {
  return writeEvent(tx, table, {
    name: 'audit.recorded',
    orgId: record.orgId,
    data: auditRecordData(record) as unknown as Record<string, unknown>,
  });
}

/** The caller fields `auditOf` needs; a verified `Principal` of `@custos/auth` fits. */
export type AuditCaller = { readonly orgId: string } & (
  | { readonly kind: 'user'; readonly userId: string }
  | { readonly kind: 'agent'; readonly agentId: string }
);

/**
 * The audit record of an action a signed-in caller took on a resource of its org: the one way
 * services describe what they audit (`details` must never hold a secret value).
 */
export function auditOf(
  caller: AuditCaller,
  action: string,
  resource: { type: string; id: string | null },
  details: Record<string, unknown> = {},
): AuditRecordInput {
  return {
    orgId: caller.orgId,
    ...(caller.kind === 'user'
      ? { actorType: 'user' as const, actorId: caller.userId }
      : { actorType: 'agent' as const, actorId: caller.agentId }),
    action,
    resourceType: resource.type,
    resourceId: resource.id,
    metadata: details,
  };
}
