import { type EventEnvelope, IdempotentConsumer, type ServiceEvents, subjectFor } from '@custos/events';
import { isUuid } from '@custos/service-kit';
import type { Database, Logger } from '@custos/service-kit';
import type { AgentStore } from '../agents/agent-store.js';
import { inbox } from '../db/schema.js';
import type { Notifier } from '../notifications/notifier.js';
import type { OrgStore } from '../orgs/org-store.js';

/** The durable consumer (and inbox key) of approval notices; stable across restarts. */
export const APPROVAL_MAIL_CONSUMER = 'identity-approval-mail';

/** What identity reads of the approvals service's `approval.created` event. */
export interface ApprovalCreated {
  approvalId: string;
  orgId: string;
  agentId: string;
  action: string;
  riskTier: 1 | 2 | 3;
  kind: 'single' | 'consensus';
  title: string;
  targetType: string;
  targetId: string;
  expiresAt: Date | undefined;
}

// An approval's action as the approvals service accepts it: a requested action
// (`access_request`) or a business one (`namespace.verb`), or a platform-created one. It goes into
// the subject, so anything else is refused rather than cleaned.
const ACTION = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)?$/;

const text = (v: unknown): string => (typeof v === 'string' ? v : '');

/**
 * The approval an event announces when it is well-formed; undefined otherwise (dropped, not
 * retried). The org is the envelope's, and the data's `org_id` must agree with it when present.
 * Free text (title, target) is kept as sent: the template makes it harmless.
 */
export function approvalCreatedData(
  event: Pick<EventEnvelope, 'org_id' | 'data'>,
): ApprovalCreated | undefined {
  const d = event.data;
  const orgId = event.org_id;
  if (typeof orgId !== 'string' || !isUuid(orgId)) return undefined;
  if (d['org_id'] !== undefined && String(d['org_id']).toLowerCase() !== orgId.toLowerCase())
    return undefined;
  const approvalId = d['approval_id'];
  const agentId = d['agent_id'];
  if (typeof approvalId !== 'string' || !isUuid(approvalId)) return undefined;
  if (typeof agentId !== 'string' || !isUuid(agentId)) return undefined;
  const action = d['action'];
  if (typeof action !== 'string' || action.length > 64 || !ACTION.test(action)) return undefined;
  const tier = d['risk_tier'];
  if (tier !== 1 && tier !== 2 && tier !== 3) return undefined;
  const kind = d['kind'] ?? 'single';
  if (kind !== 'single' && kind !== 'consensus') return undefined;
  const expires = typeof d['expires_at'] === 'string' ? new Date(d['expires_at']) : undefined;
  return {
    approvalId: approvalId.toLowerCase(),
    orgId: orgId.toLowerCase(),
    agentId: agentId.toLowerCase(),
    action,
    riskTier: tier,
    kind,
    title: text(d['title']),
    targetType: text(d['target_type']),
    targetId: text(d['target_id']),
    expiresAt: expires && !Number.isNaN(expires.getTime()) ? expires : undefined,
  };
}

/**
 * E-mails every live human of an approval's org (owners, admins and members) a notice of each new
 * approval, with the link to it (issue 19). The event id is recorded in identity's inbox with the
 * handler's transaction, so a redelivery sends nothing; a failed send rolls back and the event is
 * retried, so the humans mailed before the failure get the notice again (at least once, never
 * none). An event whose agent is of another org is dropped: the notice would name the wrong agent.
 */
export function startApprovalCreatedConsumer(deps: {
  events: ServiceEvents;
  db: Database;
  notifier: Pick<Notifier, 'approvalRequested'>;
  orgs: Pick<OrgStore, 'listMembers'>;
  agents: Pick<AgentStore, 'findById'>;
  logger: Logger;
}): IdempotentConsumer {
  const consumer = new IdempotentConsumer({
    link: deps.events.link,
    stream: deps.events.stream,
    durable: APPROVAL_MAIL_CONSUMER,
    filterSubject: subjectFor(deps.events.subjectPrefix, 'approval.created'),
    db: deps.db,
    inbox,
    logger: deps.logger,
    handler: async (event: EventEnvelope) => {
      await mailApproval(deps, event);
    },
  });
  consumer.start();
  return consumer;
}

/** The handler of one `approval.created` event (exported for tests of its refusals). */
export async function mailApproval(
  deps: {
    notifier: Pick<Notifier, 'approvalRequested'>;
    orgs: Pick<OrgStore, 'listMembers'>;
    agents: Pick<AgentStore, 'findById'>;
    logger: Logger;
  },
  event: Pick<EventEnvelope, 'id' | 'org_id' | 'data'>,
): Promise<number> {
  const a = approvalCreatedData(event);
  if (!a) {
    deps.logger.error({ event_id: event.id }, 'dropping malformed approval.created event');
    return 0;
  }
  const agent = await deps.agents.findById(a.agentId);
  if (agent && agent.orgId !== a.orgId) {
    deps.logger.error(
      { event_id: event.id, approval_id: a.approvalId, agent_id: a.agentId },
      'dropping approval.created event: the agent is of another org',
    );
    return 0;
  }
  const members = await deps.orgs.listMembers(a.orgId);
  for (const m of members) {
    await deps.notifier.approvalRequested(m.email, {
      approvalId: a.approvalId,
      action: a.action,
      riskTier: a.riskTier,
      kind: a.kind,
      title: a.title,
      // An agent removed since it asked is named by its id.
      agentName: agent?.name ?? a.agentId,
      targetType: a.targetType,
      targetId: a.targetId,
      expiresAt: a.expiresAt,
    });
  }
  deps.logger.info(
    { event_id: event.id, approval_id: a.approvalId, recipients: members.length },
    'approval notice mailed',
  );
  return members.length;
}
