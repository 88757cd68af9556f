/**
 * The event names of spec §6 that webhooks may subscribe to, by group. This list is the contract:
 * the webhook API validates subscriptions against it and the dispatcher consumes exactly these.
 */
export const EVENT_GROUPS = {
  treasury: [
    'wallet.transfer.sent',
    'wallet.transfer.received',
    'deposit.received',
    'deposit.confirmed',
    'deposit.credited',
    'deposit_destination.created',
    'fiat.onramp.completed',
    'fiat.offramp.completed',
    'internal_transfer.completed',
  ],
  multisig: ['proposal.created', 'proposal.signed', 'proposal.executed', 'proposal.cancelled'],
  agent: ['agent.transaction.broadcast', 'agent.transaction.signed', 'signing_key.rotated'],
  policy: ['policy.created', 'policy.updated', 'policy.deleted'],
  cards: [
    'card.ordered',
    'card.ready',
    'card.revealed',
    'card.voided',
    'card.depleted',
    'card.orphaned_payment',
    'card.rejected',
  ],
  approvals: [
    'approval.created',
    'approval.decided',
    'pending_approval.created',
    'pending_approval.approved',
    'pending_approval.rejected',
    'pending_approval.executed',
    'pending_approval.expired',
  ],
  platform: [
    'platform.user.connected',
    'platform.user.claimed',
    'platform.user.disconnected',
    'platform.bootstrap.completed',
    'platform.grant.created',
    'platform.grant.revoked',
  ],
  policy_backend: ['policy_backend.circuit_breaker_opened', 'policy_backend.circuit_breaker_closed'],
} as const;

/** Every subscribable event name. */
export type SubscribableEvent = (typeof EVENT_GROUPS)[keyof typeof EVENT_GROUPS][number];

/** Every subscribable event name, in spec order. */
export const SUBSCRIBABLE_EVENTS: readonly SubscribableEvent[] = Object.values(EVENT_GROUPS).flat();

const subscribable = new Set<string>(SUBSCRIBABLE_EVENTS);

/** True when `name` is an event webhooks may subscribe to. */
export function isSubscribableEvent(name: string): name is SubscribableEvent {
  return subscribable.has(name);
}

/**
 * Events that travel between services but are not offered to webhooks. Each issue that adds one
 * lists it here, so that the catalogue stays the single place where event names are defined.
 */
export const INTERNAL_EVENTS = [
  /** One audit record, written by the acting service in the action's transaction (see audit.ts). */
  'audit.recorded',
  /** A share to an external e-mail address was created; identity mails the link (vault-crypto shares). */
  'share.email_requested',
] as const;

/**
 * The first parts of the subscribable event names (`policy`, `card`, `deposit_destination` ...).
 * No internal event shares one, so a subject filter `<prefix>.<family>.>` reads subscribable
 * events only: webhook-dispatcher fans out through one consumer per family and never receives
 * audit records or share mail requests (NATS 2.9 takes one filter per consumer).
 */
export const SUBSCRIBABLE_FAMILIES: readonly string[] = [
  ...new Set(SUBSCRIBABLE_EVENTS.map((e) => e.slice(0, e.indexOf('.')))),
];

/** Any event name a service may write to its outbox. */
export type EventName = SubscribableEvent | (typeof INTERNAL_EVENTS)[number];

/** The envelope of every event, on the wire and in webhook bodies (DECISIONS.md: webhooks). */
export interface EventEnvelope<D = Record<string, unknown>> {
  id: string;
  type: EventName;
  created_at: string;
  org_id: string | null;
  data: D;
}

/** The event whose subject names its producer: `<prefix>.audit.recorded.<service>`. */
export const AUDIT_RECORDED = 'audit.recorded';

/**
 * The NATS subject an event is published on: `<prefix>.<name>`, and for an audit record
 * `<prefix>.audit.recorded.<producer>`, so that NATS permissions pin who may record.
 */
export function subjectFor(prefix: string, name: string, producer?: string): string {
  if (name !== AUDIT_RECORDED) return `${prefix}.${name}`;
  if (!producer || !/^[a-z][a-z0-9-]*$/.test(producer))
    throw new Error(`an ${AUDIT_RECORDED} subject needs the producing service's name`);
  return `${prefix}.${AUDIT_RECORDED}.${producer}`;
}

/** The subject filter of every audit record, whoever produced it. */
export function auditRecordedFilter(prefix: string): string {
  return `${prefix}.${AUDIT_RECORDED}.>`;
}

/** What a delivered message's subject says about it. */
export interface EventSubject {
  /** The event name the subject carries. */
  name: string;
  /** The producing service (audit records only; null for other events). */
  producer: string | null;
}

/**
 * Reads an event subject: `<prefix>.<name>` or `<prefix>.audit.recorded.<producer>`. Undefined
 * when the subject is not under `prefix` or names no catalogue event, or an audit record's subject
 * names no producer.
 */
export function eventOfSubject(prefix: string, subject: string): EventSubject | undefined {
  if (!subject.startsWith(`${prefix}.`)) return undefined;
  const rest = subject.slice(prefix.length + 1);
  const audit = `${AUDIT_RECORDED}.`;
  if (rest.startsWith(audit)) {
    const producer = rest.slice(audit.length);
    return /^[a-z][a-z0-9-]*$/.test(producer) ? { name: AUDIT_RECORDED, producer } : undefined;
  }
  if (rest === AUDIT_RECORDED) return undefined;
  return isEventName(rest) ? { name: rest, producer: null } : undefined;
}

const eventNames = new Set<string>([...SUBSCRIBABLE_EVENTS, ...INTERNAL_EVENTS]);

/** True when `name` is an event of the catalogue. */
export function isEventName(name: string): name is EventName {
  return eventNames.has(name);
}
