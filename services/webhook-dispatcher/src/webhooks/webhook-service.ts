import { randomUUID } from 'node:crypto';
import type { Principal, UserPrincipal } from '@custos/auth';
import { writeAudit } from '@custos/events';
import type { Delivery, Webhook } from '@custos/proto/custos/webhook_dispatcher/v1/messages';
import {
  ConflictError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
  isUuid,
} from '@custos/service-kit';
import { outbox } from '../db/schema.js';
import { DestinationRefusedError } from '../delivery/destination.js';
import {
  MAX_WEBHOOKS_PER_ORG,
  type WebhookRecord,
  newSecret,
  parseWebhookInput,
  parseWebhookPatch,
  sealSecret,
  webhookView,
} from './webhook-fns.js';
import type { DeliveryRecord, WebhookStore } from './webhook-store.js';

const STATUSES = new Set(['pending', 'succeeded', 'failed']);

/** Dependencies of WebhookService. */
export interface WebhookServiceDeps {
  store: WebhookStore;
  /** WEBHOOK_SECRET_KEY: seals signing secrets at rest. */
  secretKey: Buffer;
  /**
   * Judges a destination URL as a delivery would (syntax, then DNS once, every address allowed);
   * returns the URL as it will be stored, or throws DestinationRefusedError.
   */
  checkDestination: (url: string) => Promise<string>;
}

/**
 * An org's webhooks (SPEC.md §4.8). Managing them, and reading their delivery history, is for the
 * org's human owners and admins; agents are refused (SPEC.md §5.8). Every change is audited in
 * its transaction. The signing secret is returned by `create` and never again.
 */
export class WebhookService {
  constructor(private readonly deps: WebhookServiceDeps) {}

  private manage(p: Principal): UserPrincipal {
    if (p.kind !== 'user')
      throw new PermissionDeniedError('webhook management is for human users; agents may not');
    if (p.role !== 'owner' && p.role !== 'admin') {
      throw new PermissionDeniedError('only an org owner or admin may manage webhooks');
    }
    return p;
  }

  private async destination(url: string): Promise<string> {
    try {
      return await this.deps.checkDestination(url);
    } catch (err) {
      if (err instanceof DestinationRefusedError)
        throw new InvalidArgumentError('url', `url refused: ${err.reason}`);
      throw err;
    }
  }

  async create(p: Principal, fields: Record<string, unknown>): Promise<{ webhook: Webhook; secret: string }> {
    const caller = this.manage(p);
    const input = parseWebhookInput(fields);
    const url = await this.destination(input.url);
    const id = randomUUID();
    const secret = newSecret();
    const row = await this.deps.store.transaction(async (tx) => {
      await this.deps.store.lockOrg(caller.orgId, tx);
      if ((await this.deps.store.countByOrg(caller.orgId, tx)) >= MAX_WEBHOOKS_PER_ORG) {
        throw new ConflictError(`an org may have at most ${MAX_WEBHOOKS_PER_ORG} webhooks`);
      }
      const r = await this.deps.store.insert(
        {
          ...input,
          url,
          id,
          orgId: caller.orgId,
          createdBy: caller.userId,
          secretSealed: sealSecret(this.deps.secretKey, id, secret),
        },
        tx,
      );
      await writeAudit(
        tx,
        outbox,
        auditOf(caller, 'webhook.created', r, { host: hostOf(r.url), events: r.events }),
      );
      return r;
    });
    return { webhook: webhookView(row), secret };
  }

  async list(p: Principal): Promise<Webhook[]> {
    const caller = this.manage(p);
    return (await this.deps.store.listByOrg(caller.orgId)).map(webhookView);
  }

  async get(p: Principal, id: string): Promise<Webhook> {
    const caller = this.manage(p);
    return webhookView(await this.found(caller, id));
  }

  async update(p: Principal, id: string, fields: Record<string, unknown>): Promise<Webhook> {
    const caller = this.manage(p);
    await this.found(caller, id);
    const patch = parseWebhookPatch(fields);
    if (patch.url !== undefined) patch.url = await this.destination(patch.url);
    const row = await this.deps.store.transaction(async (tx) => {
      const r = await this.deps.store.update(caller.orgId, id.toLowerCase(), patch, tx);
      if (!r) throw new NotFoundError('webhook', id);
      await writeAudit(
        tx,
        outbox,
        auditOf(caller, 'webhook.updated', r, {
          changed: Object.keys(fields).sort(),
          host: hostOf(r.url),
          events: r.events,
          is_active: r.isActive,
        }),
      );
      return r;
    });
    return webhookView(row);
  }

  async delete(p: Principal, id: string): Promise<void> {
    const caller = this.manage(p);
    if (!isUuid(id)) throw new NotFoundError('webhook', id.slice(0, 64));
    await this.deps.store.transaction(async (tx) => {
      const r = await this.deps.store.delete(caller.orgId, id.toLowerCase(), tx);
      if (!r) throw new NotFoundError('webhook', id);
      await writeAudit(tx, outbox, auditOf(caller, 'webhook.deleted', r, { host: hostOf(r.url) }));
    });
  }

  async deliveries(
    p: Principal,
    id: string,
    q: { limit: number; offset: number; status: string },
  ): Promise<{ deliveries: Delivery[]; count: number }> {
    const caller = this.manage(p);
    const hook = await this.found(caller, id);
    if (q.status && !STATUSES.has(q.status)) {
      throw new InvalidArgumentError('status', 'status must be pending, succeeded or failed');
    }
    const r = await this.deps.store.listDeliveries(hook.id, {
      limit: q.limit > 0 ? Math.min(q.limit, 1000) : 100,
      offset: Math.max(0, q.offset),
      ...(q.status ? { status: q.status } : {}),
    });
    return { deliveries: r.deliveries.map(deliveryView), count: r.count };
  }

  private async found(caller: UserPrincipal, id: string): Promise<WebhookRecord> {
    if (!isUuid(id)) throw new NotFoundError('webhook', id.slice(0, 64));
    const r = await this.deps.store.get(caller.orgId, id.toLowerCase());
    if (!r) throw new NotFoundError('webhook', id);
    return r;
  }
}

function deliveryView(d: DeliveryRecord): Delivery {
  return {
    id: d.id,
    webhookId: d.webhookId,
    eventId: d.eventId,
    eventType: d.eventType,
    status: d.status,
    attemptCount: d.attemptCount,
    nextAttemptAt: d.status === 'pending' ? d.nextAttemptAt.toISOString() : '',
    createdAt: d.createdAt.toISOString(),
    completedAt: d.completedAt ? d.completedAt.toISOString() : '',
    attempts: d.attempts.map((a) => ({
      attempt: a.attempt,
      ...(a.statusCode !== null ? { statusCode: a.statusCode } : {}),
      durationMs: a.durationMs,
      error: a.error,
      attemptedAt: a.attemptedAt.toISOString(),
    })),
  };
}

function auditOf(caller: UserPrincipal, action: string, r: WebhookRecord, metadata: Record<string, unknown>) {
  return {
    orgId: r.orgId,
    actorType: 'user' as const,
    actorId: caller.userId,
    action,
    resourceType: 'webhook',
    resourceId: r.id,
    metadata,
  };
}

/** The host of a stored URL: audit records name where deliveries go, never a path or query that may hold a token. */
function hostOf(url: string): string {
  return new URL(url).host;
}
