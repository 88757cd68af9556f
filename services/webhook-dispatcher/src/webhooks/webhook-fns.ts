import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { type EventEnvelope, isSubscribableEvent } from '@custos/events';
import type { Webhook } from '@custos/proto/custos/webhook_dispatcher/v1/messages';
import { InvalidArgumentError } from '@custos/service-kit';

/** The longest `description` accepted, in characters. */
export const MAX_DESCRIPTION = 1000;
/** How many webhooks one org may register. */
export const MAX_WEBHOOKS_PER_ORG = 100;
/** Retries after the first attempt (DECISIONS.md: webhooks), so at most six attempts in all. */
export const MAX_RETRIES = 5;
/** Prefix of every signing secret, so a leaked one is recognisable. */
export const SECRET_PREFIX = 'whsec_';

const CREATE_FIELDS = new Set(['url', 'events', 'description']);
const PATCH_FIELDS = new Set(['url', 'events', 'is_active', 'description']);

/** A stored webhook, secret still sealed. */
export interface WebhookRecord {
  id: string;
  orgId: string;
  url: string;
  events: string[];
  description: string;
  isActive: boolean;
  secretSealed: string;
  createdBy: string;
  createdAt: Date;
  updatedAt: Date;
}

/** Validated fields of a new webhook; the URL is checked by the destination rules separately. */
export interface WebhookInput {
  url: string;
  events: string[];
  description: string;
}

/** Validated fields of a PATCH; absent keys are left unchanged. */
export interface WebhookPatch {
  url?: string;
  events?: string[];
  description?: string;
  isActive?: boolean;
}

function refuseUnknown(fields: Record<string, unknown>, allowed: Set<string>, what: string): void {
  for (const k of Object.keys(fields)) {
    if (!allowed.has(k)) {
      throw new InvalidArgumentError(
        k,
        `${k.slice(0, 64)} is not a field of ${what} (${[...allowed].join(', ')})`,
      );
    }
  }
}

/** The raw `url` field: a non-empty string (the destination rules then judge where it points). */
export function urlField(v: unknown): string {
  if (typeof v !== 'string' || v.trim() === '') {
    throw new InvalidArgumentError('url', 'url is required and must be an https URL');
  }
  return v.trim();
}

/**
 * The `events` field: a non-empty array of event names of SPEC.md §6, returned sorted and without
 * repeats. The first unknown name is named in the refusal.
 */
export function eventsField(v: unknown): string[] {
  if (!Array.isArray(v) || v.length === 0) {
    throw new InvalidArgumentError(
      'events',
      'events is required and must be a non-empty array of event names',
    );
  }
  for (const e of v) {
    if (typeof e !== 'string') throw new InvalidArgumentError('events', 'events must contain only strings');
    if (!isSubscribableEvent(e)) {
      const shown = JSON.stringify(e.slice(0, 100));
      throw new InvalidArgumentError('events', `events: ${shown} is not a subscribable event name`);
    }
  }
  return [...new Set(v as string[])].sort();
}

function descriptionField(v: unknown): string {
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw new InvalidArgumentError('description', 'description must be a string');
  if (v.length > MAX_DESCRIPTION) {
    throw new InvalidArgumentError(
      'description',
      `description must be at most ${MAX_DESCRIPTION} characters`,
    );
  }
  // Postgres text cannot hold NUL: refuse it here rather than fail the insert.
  if (v.includes('\u0000')) {
    throw new InvalidArgumentError('description', 'description must not contain NUL characters');
  }
  return v;
}

/** Validates the body of a new webhook, naming the first field it refuses (unknown fields too). */
export function parseWebhookInput(fields: Record<string, unknown>): WebhookInput {
  refuseUnknown(fields, CREATE_FIELDS, 'a new webhook');
  return {
    url: urlField(fields['url']),
    events: eventsField(fields['events']),
    description: descriptionField(fields['description']),
  };
}

/** Validates a PATCH body: any of url, events, is_active, description; at least one. */
export function parseWebhookPatch(fields: Record<string, unknown>): WebhookPatch {
  refuseUnknown(fields, PATCH_FIELDS, 'a webhook update');
  const patch: WebhookPatch = {};
  if ('url' in fields) patch.url = urlField(fields['url']);
  if ('events' in fields) patch.events = eventsField(fields['events']);
  if ('description' in fields) patch.description = descriptionField(fields['description']);
  if ('is_active' in fields) {
    if (typeof fields['is_active'] !== 'boolean') {
      throw new InvalidArgumentError('is_active', 'is_active must be true or false');
    }
    patch.isActive = fields['is_active'];
  }
  if (Object.keys(patch).length === 0) {
    throw new InvalidArgumentError('body', 'give at least one of url, events, is_active, description');
  }
  return patch;
}

/** The webhook as gRPC (and HTTP) returns it; never its secret. */
export function webhookView(r: WebhookRecord): Webhook {
  return {
    id: r.id,
    orgId: r.orgId,
    url: r.url,
    events: r.events,
    description: r.description,
    isActive: r.isActive,
    createdBy: r.createdBy,
    createdAt: r.createdAt.toISOString(),
    updatedAt: r.updatedAt.toISOString(),
  };
}

/** A new signing secret: `whsec_` and 32 random bytes in hex. */
export function newSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('hex');
}

/** Seals a secret with AES-256-GCM under `key`, bound to the webhook id (AAD). */
export function sealSecret(key: Buffer, webhookId: string, secret: string): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  c.setAAD(Buffer.from(webhookId, 'utf8'));
  const ct = Buffer.concat([c.update(secret, 'utf8'), c.final()]);
  return ['v1', iv, c.getAuthTag(), ct]
    .map((p) => (typeof p === 'string' ? p : p.toString('base64url')))
    .join('.');
}

/** Opens a sealed secret; throws when the key or the webhook id does not match. */
export function openSecret(key: Buffer, webhookId: string, sealed: string): string {
  const [v, iv, tag, ct] = sealed.split('.');
  if (v !== 'v1' || !iv || !tag || ct === undefined) throw new Error('unknown sealed-secret format');
  const d = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  d.setAAD(Buffer.from(webhookId, 'utf8'));
  d.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([d.update(Buffer.from(ct, 'base64url')), d.final()]).toString('utf8');
}

/** Lowercase hex HMAC-SHA256 of the exact body bytes, keyed with the secret (SPEC.md §6.1). */
export function signBody(secret: string, body: string): string {
  return createHmac('sha256', secret).update(body, 'utf8').digest('hex');
}

/** The delivery body (DECISIONS.md: webhooks), serialised once so every attempt sends the same bytes. */
export function deliveryBody(e: EventEnvelope): string {
  return JSON.stringify({ id: e.id, type: e.type, created_at: e.created_at, org_id: e.org_id, data: e.data });
}

/**
 * The wait before retry `n` (1 for the first retry): base × 4^(n-1), scaled by a factor in
 * [0.8, 1.2] (`random` in [0, 1)) so that receivers recovering from an outage are not hit in step.
 */
export function retryDelayMs(n: number, baseMs: number, random: number): number {
  return Math.round(baseMs * 4 ** (n - 1) * (0.8 + 0.4 * random));
}

/**
 * What a failed attempt leads to: with `attempts` tries made, another is due unless the retries
 * are used up.
 */
export function afterFailure(attempts: number): 'retry' | 'failed' {
  return attempts >= 1 + MAX_RETRIES ? 'failed' : 'retry';
}
