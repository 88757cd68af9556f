import { Router } from 'express';
import { z } from 'zod/v4';
import type { Delivery, Webhook } from '@custos/proto/custos/webhook_dispatcher/v1/messages';
import { WebhookDispatcherServiceClient } from '@custos/proto/custos/webhook_dispatcher/v1/service';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { type Guards, declareRoute } from './routes.js';
import { bodyOf, dateTime, idParam, intQuery, must } from './schemas.js';

// The dispatcher judges what needs its data or its rules: which event names can be subscribed to
// (the catalogue) and where a URL may point (scheme, host, every address it resolves to).
const url = z.string().min(1, 'must be an https URL').max(2048);
const events = z
  .array(z.string().max(100))
  .min(1, 'must name at least one event')
  .max(100)
  .describe('Event names (SPEC.md §6); repeats are dropped');
const description = z.string().max(1000).nullable().describe('Free text; null or empty for none');

const CreateBody = bodyOf({
  url: url.describe('Where deliveries are POSTed: https (or http where the operator allows it)'),
  events,
  description: description.optional(),
});

const UpdateBody = bodyOf({
  url: url.optional(),
  events: events.optional(),
  is_active: z.boolean().optional().describe('false pauses deliveries; true resumes them'),
  description: description.optional(),
}).refine((b) => Object.keys(b).length > 0, {
  message: 'give at least one of url, events, is_active, description',
});

/** A webhook as HTTP shows it (the reference's WebhookResponse, plus org and audit fields). */
export const WebhookResponse = z.object({
  id: z.string(),
  org_id: z.string(),
  url: z.string(),
  events: z.array(z.string()).describe('Sorted'),
  description: z.string().describe('Empty when none was given'),
  is_active: z.boolean(),
  created_by: z.string().describe('The user who created it'),
  created_at: dateTime,
  updated_at: dateTime,
});

const WebhookCreatedResponse = WebhookResponse.extend({
  secret: z.string().describe('`whsec_` + 64 hex digits: the HMAC-SHA256 signing key, shown only here'),
});

const DeliveryResponse = z.object({
  id: z.string(),
  webhook_id: z.string(),
  event_id: z.string().describe('Also the body `id` and the `X-Webhook-Id` header'),
  event_type: z.string(),
  status: z.enum(['pending', 'succeeded', 'failed']),
  attempt_count: z.number().int(),
  next_attempt_at: dateTime.nullable().describe('null once the delivery is finished'),
  created_at: dateTime,
  completed_at: dateTime.nullable().describe('null while pending'),
  attempts: z
    .array(
      z.object({
        attempt: z.number().int().describe('1 for the first try, 2 to 6 for the retries'),
        status_code: z.number().int().nullable().describe("The receiver's status; null when none came"),
        duration_ms: z.number().int(),
        error: z.string().nullable().describe('Why the try failed; null on success'),
        attempted_at: dateTime,
      }),
    )
    .describe('Every try, oldest first'),
});

const DeliveriesResponse = z.object({
  deliveries: z.array(DeliveryResponse).describe('Newest first'),
  count: z.number().int().describe('How many deliveries match the filter in all'),
});

const DeliveriesQuery = z.object({
  limit: intQuery(1, 1000, 'Page size (default 100)').optional(),
  offset: intQuery(0, 2 ** 31 - 1, 'How many to skip').optional(),
  status: z
    .enum(['pending', 'succeeded', 'failed'], { error: 'must be pending, succeeded or failed' })
    .optional()
    .describe('Only deliveries in this status'),
});

const IdParams = z.object({ id: idParam });

function webhookBody(w: Webhook): z.infer<typeof WebhookResponse> {
  return {
    id: w.id,
    org_id: w.orgId,
    url: w.url,
    events: w.events,
    description: w.description,
    is_active: w.isActive,
    created_by: w.createdBy,
    created_at: w.createdAt,
    updated_at: w.updatedAt,
  };
}

function deliveryBody(d: Delivery): z.infer<typeof DeliveryResponse> {
  return {
    id: d.id,
    webhook_id: d.webhookId,
    event_id: d.eventId,
    event_type: d.eventType,
    status: d.status as z.infer<typeof DeliveryResponse>['status'],
    attempt_count: d.attemptCount,
    next_attempt_at: d.nextAttemptAt ?? null,
    created_at: d.createdAt,
    completed_at: d.completedAt ?? null,
    attempts: d.attempts.map((a) => ({
      attempt: a.attempt,
      status_code: a.statusCode ?? null,
      duration_ms: a.durationMs,
      error: a.error ?? null,
      attempted_at: a.attemptedAt,
    })),
  };
}

/**
 * An org's webhooks (SPEC.md §4.8) and their delivery history. Human-only (SPEC.md §5.8): agents
 * get 403 here; the webhook-dispatcher service checks again and decides which humans may.
 */
export function webhookRoutes(peers: Peers, guards: Guards): Router {
  const router = Router();
  const hooks = peers.client(WebhookDispatcherServiceClient, 'webhook-dispatcher');
  const call = unaryCaller(hooks);
  const tag = 'webhooks';

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/webhooks',
      access: 'human',
      summary: 'Register a webhook (owners and admins); its signing secret is returned once',
      tag,
      body: CreateBody,
      responses: { 201: { description: 'The webhook and its secret', schema: WebhookCreatedResponse } },
    },
    async (_req, res, { body }) => {
      const r = await call(hooks.createWebhook, {
        url: body.url,
        events: body.events,
        description: body.description ?? '',
      });
      // The secret is in this response and nowhere else, ever; no cache may keep it.
      res.setHeader('Cache-Control', 'no-store');
      res.status(201).json({ ...webhookBody(must(r.webhook, 'the webhook')), secret: r.secret });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/webhooks',
      access: 'human',
      summary: "The org's webhooks, oldest first (owners and admins)",
      tag,
      responses: {
        200: { description: 'The webhooks', schema: z.object({ webhooks: z.array(WebhookResponse) }) },
      },
    },
    async (_req, res) => {
      const r = await call(hooks.listWebhooks, {});
      res.json({ webhooks: r.webhooks.map(webhookBody) });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/webhooks/:id',
      access: 'human',
      summary: 'One webhook (owners and admins)',
      tag,
      params: IdParams,
      responses: { 200: { description: 'The webhook', schema: WebhookResponse } },
    },
    async (_req, res, { params }) => {
      const r = await call(hooks.getWebhook, { webhookId: params.id });
      res.json(webhookBody(must(r.webhook, 'the webhook')));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'patch',
      path: '/v1/webhooks/:id',
      access: 'human',
      summary: "Change a webhook's url, events, is_active or description (owners and admins)",
      tag,
      params: IdParams,
      body: UpdateBody,
      responses: { 200: { description: 'The webhook after the change', schema: WebhookResponse } },
    },
    async (_req, res, { params, body }) => {
      const r = await call(hooks.updateWebhook, {
        webhookId: params.id,
        ...(body.url !== undefined ? { url: body.url } : {}),
        ...(body.events !== undefined ? { events: { names: body.events } } : {}),
        ...(body.is_active !== undefined ? { isActive: body.is_active } : {}),
        // null clears the description, as an empty string does.
        ...(body.description !== undefined ? { description: body.description ?? '' } : {}),
      });
      res.json(webhookBody(must(r.webhook, 'the webhook')));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'delete',
      path: '/v1/webhooks/:id',
      access: 'human',
      summary: 'Remove a webhook; its pending deliveries are not sent (owners and admins)',
      tag,
      params: IdParams,
      responses: { 204: { description: 'Removed' } },
    },
    async (_req, res, { params }) => {
      await call(hooks.deleteWebhook, { webhookId: params.id });
      res.status(204).end();
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/webhooks/:id/deliveries',
      access: 'human',
      summary: "A webhook's deliveries, newest first, each with every attempt (owners and admins)",
      tag,
      params: IdParams,
      query: DeliveriesQuery,
      responses: { 200: { description: 'A page of deliveries', schema: DeliveriesResponse } },
    },
    async (_req, res, { params, query }) => {
      const r = await call(hooks.listDeliveries, {
        webhookId: params.id,
        limit: query.limit ?? 100,
        offset: query.offset ?? 0,
        status: query.status ?? '',
      });
      res.json({ deliveries: r.deliveries.map(deliveryBody), count: Number(r.count) });
    },
  );

  return router;
}
