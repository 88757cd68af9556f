import { createHmac, randomBytes } from 'node:crypto';
import { InvalidArgumentError } from '@custos/service-kit';
import {
  MAX_RETRIES,
  afterFailure,
  deliveryBody,
  changedFields,
  checkNewWebhook,
  checkWebhookPatch,
  eventsField,
  openSecret,
  retryDelayMs,
  sealSecret,
  signBody,
} from './webhook-fns';

function refusal(fn: () => unknown): { field: string; detail: string } | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof InvalidArgumentError) return { field: String(err.field), detail: err.message };
    throw err;
  }
  return undefined;
}

describe('webhook fields', () => {
  it('takes only subscribable event names, sorted and without repeats', () => {
    expect(eventsField(['policy.deleted', 'approval.created', 'policy.deleted'])).toEqual([
      'approval.created',
      'policy.deleted',
    ]);
    expect(refusal(() => eventsField(['policy.created', 'audit.recorded']))).toMatchObject({
      field: 'events',
      detail: expect.stringContaining('"audit.recorded"'),
    });
    for (const bad of [[], ['*'], [''], ['policy.created', 'policy.nope']]) {
      expect(refusal(() => eventsField(bad))?.field).toBe('events');
    }
  });

  it('checks a new webhook: trimmed url, known events, a description the database can hold', () => {
    const ok = { url: ' https://example.com/h ', events: ['policy.created'], description: '' };
    expect(checkNewWebhook(ok)).toEqual({ ...ok, url: 'https://example.com/h' });
    expect(refusal(() => checkNewWebhook({ ...ok, url: '  ' }))?.field).toBe('url');
    expect(refusal(() => checkNewWebhook({ ...ok, description: 'a\u0000b' }))?.field).toBe('description');
    expect(refusal(() => checkNewWebhook({ ...ok, description: 'x'.repeat(1001) }))?.field).toBe(
      'description',
    );
  });

  it('patches only what is given, refuses an empty patch, and names what changed', () => {
    expect(checkWebhookPatch({ isActive: false })).toEqual({ isActive: false });
    expect(checkWebhookPatch({ description: '' })).toEqual({ description: '' });
    expect(refusal(() => checkWebhookPatch({}))?.field).toBe('body');
    expect(refusal(() => checkWebhookPatch({ events: [] }))?.field).toBe('events');
    expect(changedFields({ isActive: true, url: 'https://a.example', description: '' })).toEqual([
      'description',
      'is_active',
      'url',
    ]);
  });
});

describe('secrets and signatures', () => {
  const key = randomBytes(32);

  it('seals a secret so that only the same key and webhook id open it', () => {
    const sealed = sealSecret(key, 'hook-1', 'whsec_abc');
    expect(sealed).not.toContain('whsec_abc');
    expect(openSecret(key, 'hook-1', sealed)).toBe('whsec_abc');
    expect(() => openSecret(key, 'hook-2', sealed)).toThrow();
    expect(() => openSecret(randomBytes(32), 'hook-1', sealed)).toThrow();
    const [v, iv, tag, ct] = sealed.split('.');
    const flipped = Buffer.from(ct!, 'base64url');
    flipped[0] = flipped[0]! ^ 1;
    expect(() => openSecret(key, 'hook-1', [v, iv, tag, flipped.toString('base64url')].join('.'))).toThrow();
  });

  it('signs the exact body bytes: lowercase hex HMAC-SHA256 keyed with the secret', () => {
    const body = deliveryBody({
      id: 'e1',
      type: 'policy.created',
      created_at: '2026-01-01T00:00:00.000Z',
      org_id: 'o1',
      data: { policy_id: 'p1', note: 'ünïcode' },
    });
    expect(JSON.parse(body)).toEqual({
      id: 'e1',
      type: 'policy.created',
      created_at: '2026-01-01T00:00:00.000Z',
      org_id: 'o1',
      data: { policy_id: 'p1', note: 'ünïcode' },
    });
    const sig = signBody('whsec_k', body);
    expect(sig).toBe(createHmac('sha256', 'whsec_k').update(Buffer.from(body, 'utf8')).digest('hex'));
    expect(sig).toMatch(/^[0-9a-f]{64}$/);
    expect(signBody('whsec_k', `${body} `)).not.toBe(sig);
  });
});

describe('retry schedule', () => {
  it('waits base × 4^(n-1) within ±20 %', () => {
    expect([1, 2, 3, 4, 5].map((n) => retryDelayMs(n, 5000, 0.5))).toEqual([
      5000, 20000, 80000, 320000, 1280000,
    ]);
    expect(retryDelayMs(1, 5000, 0)).toBe(4000);
    expect(retryDelayMs(1, 5000, 0.999999)).toBeLessThanOrEqual(6000);
    expect(retryDelayMs(3, 5000, 0)).toBe(64000);
  });

  it('allows five retries after the first attempt, then fails', () => {
    expect(MAX_RETRIES).toBe(5);
    expect([1, 2, 3, 4, 5].map(afterFailure)).toEqual(['retry', 'retry', 'retry', 'retry', 'retry']);
    expect(afterFailure(6)).toBe('failed');
  });
});
