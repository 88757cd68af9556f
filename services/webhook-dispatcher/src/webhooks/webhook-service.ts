import { randomUUID } from 'node:crypto';
import { type OrgAdmin, type Principal, requireHumanAdmin } from '@custos/auth';
import { auditOf } from '@custos/events';
import { ConflictError, InvalidArgumentError, NotFoundError, isUuid } from '@custos/service-kit';
import { audit } from '../audit/webhook-dispatcher-audit.js';
import { DestinationRefusedError } from '../delivery/destination.js';
import {
  MAX_WEBHOOKS_PER_ORG,
  changedFields,
  checkNewWebhook,
  checkWebhookPatch,
  newSecret,
  sealSecret,
  webhookOf,
} from './webhook-fns.js';
import type { WebhookStore } from './webhook-store.js';
import type {
  DeliveryPage,
  DeliveryQuery,
  Webhook,
  WebhookInput,
  WebhookPatch,
  WebhookRecord,
} from './webhook-types.js';

const STATUSES = new Set(['pending', 'succeeded', 'failed']);
const MANAGE = 'manage webhooks';

/** Dependencies of WebhookService. */
export interface WebhookServiceDeps {
  store: Pick<
    WebhookStore,
    | 'transaction'
    | 'lockOrg'
    | 'countByOrg'
    | 'insert'
    | 'listByOrg'
    | 'get'
    | 'update'
    | 'delete'
    | 'listDeliveries'
  >;
  /** WEBHOOK_SECRET_KEY: seals signing secrets at rest. */
  secretKey: Buffer;
  /**
   * Judges a destination URL as a delivery would (syntax, then DNS once, every address allowed);
   * returns the URL as it will be stored, or throws DestinationRefusedError.
   */
  checkDestination: (url: string) => Promise<string>;
}

const resource = (r: WebhookRecord) => ({ type: 'webhook', id: r.id });

/** The host of a stored URL: audit records name where deliveries go, never a path or query that may hold a token. */
function hostOf(url: string): string {
  return new URL(url).host;
}

/**
 * An org's webhooks (SPEC.md §4.8). Managing them, and reading their delivery history, is for the
 * org's human owners and admins; agents are refused (SPEC.md §5.8). Every change is audited in
 * its transaction. The signing secret is returned by `create` and never again.
 */
export class WebhookService {
  constructor(private readonly deps: WebhookServiceDeps) {}

  private async destination(url: string): Promise<string> {
    try {
      return await this.deps.checkDestination(url);
    } catch (err) {
      if (err instanceof DestinationRefusedError)
        throw new InvalidArgumentError('url', `url refused: ${err.reason}`);
      throw err;
    }
  }

  async create(p: Principal, fields: WebhookInput): Promise<{ webhook: Webhook; secret: string }> {
    requireHumanAdmin(p, MANAGE);
    const input = checkNewWebhook(fields);
    const url = await this.destination(input.url);
    const id = randomUUID();
    const secret = newSecret();
    const row = await this.deps.store.transaction(async (tx) => {
      await this.deps.store.lockOrg(p.orgId, tx);
      if ((await this.deps.store.countByOrg(p.orgId, tx)) >= MAX_WEBHOOKS_PER_ORG) {
        throw new ConflictError(`an org may have at most ${MAX_WEBHOOKS_PER_ORG} webhooks`);
      }
      const r = await this.deps.store.insert(
        {
          ...input,
          url,
          id,
          orgId: p.orgId,
          createdBy: p.userId,
          secretSealed: sealSecret(this.deps.secretKey, id, secret),
        },
        tx,
      );
      await audit(tx, auditOf(p, 'webhook.created', resource(r), { host: hostOf(r.url), events: r.events }));
      return r;
    });
    return { webhook: webhookOf(row), secret };
  }

  async list(p: Principal): Promise<Webhook[]> {
    requireHumanAdmin(p, MANAGE);
    return (await this.deps.store.listByOrg(p.orgId)).map(webhookOf);
  }

  async get(p: Principal, id: string): Promise<Webhook> {
    requireHumanAdmin(p, MANAGE);
    return webhookOf(await this.found(p, id));
  }

  async update(p: Principal, id: string, fields: WebhookPatch): Promise<Webhook> {
    requireHumanAdmin(p, MANAGE);
    await this.found(p, id);
    const patch = checkWebhookPatch(fields);
    if (patch.url !== undefined) patch.url = await this.destination(patch.url);
    const row = await this.deps.store.transaction(async (tx) => {
      const r = await this.deps.store.update(p.orgId, id.toLowerCase(), patch, tx);
      if (!r) throw new NotFoundError('webhook', id);
      await audit(
        tx,
        auditOf(p, 'webhook.updated', resource(r), {
          changed: changedFields(patch),
          host: hostOf(r.url),
          events: r.events,
          is_active: r.isActive,
        }),
      );
      return r;
    });
    return webhookOf(row);
  }

  async delete(p: Principal, id: string): Promise<void> {
    requireHumanAdmin(p, MANAGE);
    if (!isUuid(id)) throw new NotFoundError('webhook', id.slice(0, 64));
    await this.deps.store.transaction(async (tx) => {
      const r = await this.deps.store.delete(p.orgId, id.toLowerCase(), tx);
      if (!r) throw new NotFoundError('webhook', id);
      await audit(tx, auditOf(p, 'webhook.deleted', resource(r), { host: hostOf(r.url) }));
    });
  }

  async deliveries(p: Principal, id: string, q: DeliveryQuery): Promise<DeliveryPage> {
    requireHumanAdmin(p, MANAGE);
    const hook = await this.found(p, id);
    // The gateway checks these too; a direct caller gets the same answers.
    if (q.status !== undefined && !STATUSES.has(q.status)) {
      throw new InvalidArgumentError('status', 'status must be pending, succeeded or failed');
    }
    if (!Number.isInteger(q.limit) || q.limit < 1 || q.limit > 1000)
      throw new InvalidArgumentError('limit', 'limit must be an integer from 1 to 1000');
    if (!Number.isInteger(q.offset) || q.offset < 0)
      throw new InvalidArgumentError('offset', 'offset must be a non-negative integer');
    return this.deps.store.listDeliveries(hook.id, q);
  }

  private async found(caller: OrgAdmin, id: string): Promise<WebhookRecord> {
    if (!isUuid(id)) throw new NotFoundError('webhook', id.slice(0, 64));
    const r = await this.deps.store.get(caller.orgId, id.toLowerCase());
    if (!r) throw new NotFoundError('webhook', id);
    return r;
  }
}
