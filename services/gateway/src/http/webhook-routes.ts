import type { Request, RequestHandler } from 'express';
import { Router } from 'express';
import type { Delivery, Webhook } from '@custos/proto/custos/webhook_dispatcher/v1/messages';
import { WebhookDispatcherServiceClient } from '@custos/proto/custos/webhook_dispatcher/v1/service';
import { InvalidArgumentError, unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { body } from './auth-routes.js';
import { intParam } from './query.js';
import { declareUncheckedRoute } from './routes.js';

/** A webhook as HTTP shows it (the reference's WebhookResponse, plus org and audit fields). */
function webhookBody(w: Webhook | undefined) {
  return {
    id: w?.id,
    org_id: w?.orgId,
    url: w?.url,
    events: w?.events ?? [],
    description: w?.description ?? '',
    is_active: w?.isActive ?? false,
    created_by: w?.createdBy,
    created_at: w?.createdAt,
    updated_at: w?.updatedAt,
  };
}

function deliveryBody(d: Delivery) {
  return {
    id: d.id,
    webhook_id: d.webhookId,
    event_id: d.eventId,
    event_type: d.eventType,
    status: d.status,
    attempt_count: d.attemptCount,
    next_attempt_at: d.nextAttemptAt || null,
    created_at: d.createdAt,
    completed_at: d.completedAt || null,
    attempts: d.attempts.map((a) => ({
      attempt: a.attempt,
      status_code: a.statusCode ?? null,
      duration_ms: a.durationMs,
      error: a.error || null,
      attempted_at: a.attemptedAt,
    })),
  };
}

/**
 * An org's webhooks (SPEC.md §4.8) and their delivery history. Human-only (SPEC.md §5.8): agents
 * get 403 here; the webhook-dispatcher service checks again and decides which humans may.
 */
export function webhookRoutes(
  peers: Peers,
  guards: { authenticated: RequestHandler[]; human: RequestHandler[] },
): Router {
  const router = Router();
  const hooks = peers.client(WebhookDispatcherServiceClient, 'webhook-dispatcher');
  const call = unaryCaller(hooks);
  const id = (req: Request) => String(req.params['id']);

  declareUncheckedRoute(router, guards, 'post', '/v1/webhooks', 'human', async (req, res) => {
    const r = await call(hooks.createWebhook, { fields: body(req) });
    // The secret is in this response and nowhere else, ever; no cache may keep it.
    res.setHeader('Cache-Control', 'no-store');
    res.status(201).json({ ...webhookBody(r.webhook), secret: r.secret });
  });

  declareUncheckedRoute(router, guards, 'get', '/v1/webhooks', 'human', async (_req, res) => {
    const r = await call(hooks.listWebhooks, {});
    res.json({ webhooks: r.webhooks.map(webhookBody) });
  });

  declareUncheckedRoute(router, guards, 'get', '/v1/webhooks/:id', 'human', async (req, res) => {
    const r = await call(hooks.getWebhook, { webhookId: id(req) });
    res.json(webhookBody(r.webhook));
  });

  declareUncheckedRoute(router, guards, 'patch', '/v1/webhooks/:id', 'human', async (req, res) => {
    const r = await call(hooks.updateWebhook, { webhookId: id(req), fields: body(req) });
    res.json(webhookBody(r.webhook));
  });

  declareUncheckedRoute(router, guards, 'delete', '/v1/webhooks/:id', 'human', async (req, res) => {
    await call(hooks.deleteWebhook, { webhookId: id(req) });
    res.status(204).end();
  });

  declareUncheckedRoute(router, guards, 'get', '/v1/webhooks/:id/deliveries', 'human', async (req, res) => {
    const status = req.query['status'];
    if (status !== undefined && typeof status !== 'string')
      throw new InvalidArgumentError('status', 'status must be given once, as a string');
    const r = await call(hooks.listDeliveries, {
      webhookId: id(req),
      limit: intParam(req, 'limit', 100, 1, 1000),
      offset: intParam(req, 'offset', 0, 0, 2 ** 31 - 1),
      status: status ?? '',
    });
    res.json({ deliveries: r.deliveries.map(deliveryBody), count: Number(r.count) });
  });

  return router;
}
