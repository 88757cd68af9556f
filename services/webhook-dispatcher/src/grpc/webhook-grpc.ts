import { type IdentityKeys, currentCaller } from '@custos/auth';
import type { WebhookDispatcherServiceServer } from '@custos/proto/custos/webhook_dispatcher/v1/service';
import type { AsyncService } from '@custos/service-kit';
import type { WebhookService } from '../webhooks/webhook-service.js';

/** gRPC adapter of WebhookService: verify the caller, decode, call the rules, encode. */
export function webhookGrpc(deps: {
  keys: IdentityKeys;
  webhooks: WebhookService;
}): AsyncService<WebhookDispatcherServiceServer> {
  const caller = () => currentCaller(deps.keys);
  return {
    async createWebhook(req) {
      return deps.webhooks.create(await caller(), req.fields ?? {});
    },
    async listWebhooks() {
      return { webhooks: await deps.webhooks.list(await caller()) };
    },
    async getWebhook(req) {
      return { webhook: await deps.webhooks.get(await caller(), req.webhookId) };
    },
    async updateWebhook(req) {
      return { webhook: await deps.webhooks.update(await caller(), req.webhookId, req.fields ?? {}) };
    },
    async deleteWebhook(req) {
      await deps.webhooks.delete(await caller(), req.webhookId);
      return {};
    },
    async listDeliveries(req) {
      const r = await deps.webhooks.deliveries(await caller(), req.webhookId, {
        limit: req.limit,
        offset: req.offset,
        status: req.status,
      });
      return { deliveries: r.deliveries, count: String(r.count) };
    },
  };
}
