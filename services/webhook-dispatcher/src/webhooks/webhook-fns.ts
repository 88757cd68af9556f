import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { type EventEnvelope, isSubscribableEvent } from '@custos/events';
import { InvalidArgumentError } from '@custos/service-kit';
import type { Webhook, WebhookInput, WebhookPatch, WebhookRecord } from './webhook-types.js';

/** The longest `description` accepted, in characters. */
export const MAX_DESCRIPTION = 1000;
/** How many webhooks one org may register. */
export const MAX_WEBHOOKS_PER_ORG = 100;
/** Retries after the first attempt (DECISIONS.md: webhooks), so at most six attempts in all. */
export const MAX_RETRIES = 5;
/** Prefix of every signing secret, so a leaked one is recognisable. */
export const SECRET_PREFIX = 'whsec_';

/** The field names a patch changes, as the API and the audit records name them. */
const PATCH_FIELD_NAMES: Record<keyof WebhookPatch, string> = {
  url: 'url',
  events: 'events',
  description: 'description',
  isActive: 'is_active',
};

/** A destination URL, trimmed; the destination rules then judge where it points. */
export function urlField(v: string): string {
  const url = v.trim();
  if (url === '') throw new InvalidArgumentError('url', 'url is required and must be an https URL');
  return url;
}

/**
 * Event names: at least one, each in the catalogue of subscribable events (SPEC.md §6); returned
 * sorted and without repeats. The first name refused is named.
 */
export function eventsField(v: readonly string[]): string[] {
  if (v.length === 0) {
    throw new InvalidArgumentError('events', 'events must be a non-empty array of event names');
  }
  for (const e of v) {
    if (!isSubscribableEvent(e)) {
      const shown = JSON.stringify(e.slice(0, 100));
      throw new InvalidArgumentError('events', `events: ${shown} is not a subscribable event name`);
    }
  }
  return [...new Set(v)].sort();
}

// The gateway checks the length and NUL too; a direct caller must not reach the database with them.
function descriptionField(v: string): string {
  if (v.length > MAX_DESCRIPTION) {
    throw new InvalidArgumentError(
      'description',
      `description must be at most ${MAX_DESCRIPTION} characters`,
    );
  }
  if (v.includes('\u0000')) {
    throw new InvalidArgumentError('description', 'description must not contain NUL characters');
  }
  return v;
}

/** A new webhook's fields, checked and normalised (events sorted, URL trimmed). */
export function checkNewWebhook(input: WebhookInput): WebhookInput {
  return {
    url: urlField(input.url),
    events: eventsField(input.events),
    description: descriptionField(input.description),
  };
}

/** A patch, checked and normalised like a new webhook; at least one field must be present. */
export function checkWebhookPatch(patch: WebhookPatch): WebhookPatch {
  const out: WebhookPatch = {};
  if (patch.url !== undefined) out.url = urlField(patch.url);
  if (patch.events !== undefined) out.events = eventsField(patch.events);
  if (patch.description !== undefined) out.description = descriptionField(patch.description);
  if (patch.isActive !== undefined) out.isActive = patch.isActive;
  if (Object.keys(out).length === 0) {
    throw new InvalidArgumentError('body', 'give at least one of url, events, is_active, description');
  }
  return out;
}

/** The names of the fields a patch changes, sorted (for the audit record). */
export function changedFields(patch: WebhookPatch): string[] {
  return (Object.keys(patch) as Array<keyof WebhookPatch>).map((k) => PATCH_FIELD_NAMES[k]).sort();
}

/** The webhook without its sealed secret. */
export function webhookOf(r: WebhookRecord): Webhook {
  const { secretSealed: _sealed, ...webhook } = r;
  return webhook;
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
