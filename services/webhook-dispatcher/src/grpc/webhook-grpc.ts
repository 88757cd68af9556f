import { type IdentityKeys, currentCaller } from '@custos/auth';
import type {
  Delivery as DeliveryMessage,
  Webhook as WebhookMessage,
} from '@custos/proto/custos/webhook_dispatcher/v1/messages';
import type { WebhookDispatcherServiceServer } from '@custos/proto/custos/webhook_dispatcher/v1/service';
import type { AsyncService, RpcAccess } from '@custos/service-kit';
import type { WebhookService } from '../webhooks/webhook-service.js';
import type { DeliveryQuery, DeliveryRecord, Webhook, WebhookPatch } from '../webhooks/webhook-types.js';

function webhookMessage(w: Webhook): WebhookMessage {
  return {
    id: w.id,
    orgId: w.orgId,
    url: w.url,
    events: w.events,
    description: w.description,
    isActive: w.isActive,
    createdBy: w.createdBy,
    createdAt: w.createdAt.toISOString(),
    updatedAt: w.updatedAt.toISOString(),
  };
}

function deliveryMessage(d: DeliveryRecord): DeliveryMessage {
  return {
    id: d.id,
    webhookId: d.webhookId,
    eventId: d.eventId,
    eventType: d.eventType,
    status: d.status,
    attemptCount: d.attemptCount,
    ...(d.status === 'pending' ? { nextAttemptAt: d.nextAttemptAt.toISOString() } : {}),
    createdAt: d.createdAt.toISOString(),
    ...(d.completedAt ? { completedAt: d.completedAt.toISOString() } : {}),
    attempts: d.attempts.map((a) => ({
      attempt: a.attempt,
      ...(a.statusCode !== null ? { statusCode: a.statusCode } : {}),
      durationMs: a.durationMs,
      ...(a.error ? { error: a.error } : {}),
      attemptedAt: a.attemptedAt.toISOString(),
    })),
  };
}

/** Who may call WebhookDispatcherService: the gateway (users' requests). */
export const webhookAccess: RpcAccess<WebhookDispatcherServiceServer> = { default: ['gateway'] };

/** gRPC adapter of WebhookService: verify the caller, decode, call the rules, encode. */
export function webhookGrpc(deps: {
  keys: IdentityKeys;
  webhooks: Pick<WebhookService, 'create' | 'list' | 'get' | 'update' | 'delete' | 'deliveries'>;
}): AsyncService<WebhookDispatcherServiceServer> {
  const caller = () => currentCaller(deps.keys);
  return {
    async createWebhook(req) {
      const r = await deps.webhooks.create(await caller(), {
        url: req.url,
        events: req.events,
        description: req.description,
      });
      return { webhook: webhookMessage(r.webhook), secret: r.secret };
    },
    async listWebhooks() {
      return { webhooks: (await deps.webhooks.list(await caller())).map(webhookMessage) };
    },
    async getWebhook(req) {
      return { webhook: webhookMessage(await deps.webhooks.get(await caller(), req.webhookId)) };
    },
    async updateWebhook(req) {
      const patch: WebhookPatch = {
        ...(req.url !== undefined ? { url: req.url } : {}),
        ...(req.events !== undefined ? { events: req.events.names } : {}),
        ...(req.isActive !== undefined ? { isActive: req.isActive } : {}),
        ...(req.description !== undefined ? { description: req.description } : {}),
      };
      return { webhook: webhookMessage(await deps.webhooks.update(await caller(), req.webhookId, patch)) };
    },
    async deleteWebhook(req) {
      await deps.webhooks.delete(await caller(), req.webhookId);
      return {};
    },
    async listDeliveries(req) {
      const r = await deps.webhooks.deliveries(await caller(), req.webhookId, {
        // Proto3 sends 0 for "not given".
        limit: req.limit === 0 ? 100 : req.limit,
        offset: req.offset,
        ...(req.status ? { status: req.status as DeliveryQuery['status'] } : {}),
      });
      return { deliveries: r.deliveries.map(deliveryMessage), count: String(r.count) };
    },
  };
}
