import type { Request, Response } from 'express';
import { Router } from 'express';
import { z } from 'zod/v4';
import type { Share } from '@custos/proto/custos/vault_crypto/v1/shares';
import { isUuid, unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { type Guards, declareRoute } from './routes.js';
import { bodyOf, dateTime, idParam, isoDateTime, must } from './schemas.js';

/** The header a share's passphrase travels in (never a query parameter: URLs end up in logs). */
export const SHARE_PASSPHRASE_HEADER = 'X-Share-Passphrase';
/** The header that may carry a share's link secret instead of the link's `key` query parameter. */
export const SHARE_KEY_HEADER = 'X-Share-Key';

const RECIPIENT_TYPES = ['creator', 'external_email', 'user', 'agent', 'anyone_with_link'] as const;
const recipientType = z.enum(RECIPIENT_TYPES);

/** The reference's ShareListItem, with the share's other facts (never its passphrase). */
const ShareResponse = z.object({
  id: z.string(),
  secret_id: z.string().describe('The shared secret version (a share pins the version it was made from)'),
  vault_id: z.string(),
  secret_path: z.string(),
  recipient_type: recipientType,
  recipient_id: z.string().nullable(),
  recipient_email: z.string().nullable(),
  access_count: z.number().int(),
  max_access_count: z.number().int(),
  expires_at: dateTime,
  created_at: dateTime,
  created_by: z.string(),
  created_by_type: z.enum(['user', 'agent']),
  has_passphrase: z.boolean(),
  ip_allowlist: z.array(z.string()).nullable().describe('null: any address'),
  is_expired: z.boolean(),
  is_accepted: z.boolean(),
  is_declined: z.boolean(),
  is_revoked: z.boolean(),
});

const CreatedShareResponse = ShareResponse.extend({ share_url: z.string().describe('The public link') });

/** What the public link reveals: the pinned version and its value. */
const OpenedShareResponse = z.object({
  id: z.string().describe('The shared secret version'),
  share_id: z.string(),
  path: z.string(),
  type: z.string(),
  version: z.number().int(),
  value: z.string(),
  value_encoding: z.enum(['utf8', 'base64']),
  access_count: z.number().int(),
  max_access_count: z.number().int(),
  expires_at: dateTime,
});

const SharesResponse = z.object({ shares: z.array(ShareResponse) });

/** The body of `POST /v1/secrets/{secret_id}/share` (the reference's CreateShareRequest). */
const CreateShareBody = bodyOf({
  recipient_type: recipientType.describe('Agents may create `creator`, `user` and `agent` shares only'),
  recipient_id: z
    .string()
    .refine(isUuid, 'must be a UUID')
    .nullish()
    .describe('The user or agent, for `user` and `agent` shares'),
  email: z.string().nullish().describe('The address, for `external_email` shares'),
  expires_at: isoDateTime.describe('In the future, at most 30 days ahead'),
  max_access_count: z.number().int().min(1).max(1000).nullish().describe('Default 1'),
  passphrase: z
    .string()
    .refine((p) => [...p].length >= 8 && [...p].length <= 256, 'must be 8 to 256 characters')
    .nullish(),
  ip_allowlist: z.array(z.string()).min(1).max(100).nullish().describe('IPs and CIDRs it opens from'),
  permissions: z
    .array(z.string())
    .min(1)
    .refine((l) => l.every((p) => p === 'read'), 'may only be ["read"]: a share reveals a value')
    .nullish(),
}).superRefine((b, ctx) => {
  const named = b.recipient_type === 'user' || b.recipient_type === 'agent';
  if (named && !b.recipient_id) {
    ctx.addIssue({
      code: 'custom',
      path: ['recipient_id'],
      message: `required for ${b.recipient_type} shares`,
    });
  }
  if (!named && b.recipient_id) {
    ctx.addIssue({ code: 'custom', path: ['recipient_id'], message: 'only for user and agent shares' });
  }
  const external = b.recipient_type === 'external_email';
  if (external && !b.email) {
    ctx.addIssue({ code: 'custom', path: ['email'], message: 'required for external_email shares' });
  }
  if (!external && b.email) {
    ctx.addIssue({ code: 'custom', path: ['email'], message: 'only for external_email shares' });
  }
});

const shareParams = z.object({ share_id: idParam });

/** The HTTP shape of a share. */
export function shareListItem(s: Share): z.infer<typeof ShareResponse> {
  return {
    id: s.id,
    secret_id: s.secretId,
    vault_id: s.vaultId,
    secret_path: s.secretPath,
    recipient_type: s.recipientType as z.infer<typeof recipientType>,
    recipient_id: s.recipientId || null,
    recipient_email: s.recipientEmail || null,
    access_count: Number(s.accessCount),
    max_access_count: Number(s.maxAccessCount),
    expires_at: s.expiresAt,
    created_at: s.createdAt,
    created_by: s.createdBy,
    created_by_type: s.createdByType as 'user' | 'agent',
    has_passphrase: s.hasPassphrase,
    ip_allowlist: s.ipAllowlist.length ? s.ipAllowlist : null,
    is_expired: s.isExpired,
    is_accepted: s.isAccepted,
    is_declined: s.isDeclined,
    is_revoked: s.isRevoked,
  };
}

/**
 * The public link of a share, at the address the request came in on: the share id plus its link
 * secret in `key` (docs/decisions.md "Share links as secrets"). It is returned once, at creation.
 */
function shareUrl(req: Request, id: string, linkSecret: string): string {
  const base = `${req.protocol}://${req.get('host') ?? 'localhost'}/v1/share/${encodeURIComponent(id)}`;
  return `${base}?key=${encodeURIComponent(linkSecret)}`;
}

const shareKeyQuery = z.object({
  key: z
    .string()
    .max(64)
    .optional()
    .describe(`The link secret (from \`share_url\`); or send it in ${SHARE_KEY_HEADER}`),
});

const noStore = (res: Response) => res.setHeader('Cache-Control', 'no-store');
const tag = 'shares';

/**
 * Secret sharing (SPEC §4.6, docs/decisions.md "Sharing"). `GET /v1/share/{id}` is public (spec
 * §5.11: no auth stage, no IP filter); vault-crypto checks the recipient's token when the share
 * names one, the share's own IP allowlist, its passphrase, expiry and access count.
 */
export function shareRoutes(peers: Peers, guards: Guards): Router {
  const router = Router();
  const vc = peers.vaultCrypto;
  const call = unaryCaller(vc);

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/secrets/:secret_id/share',
      access: 'authenticated',
      summary: 'Share a secret version the caller may read (10 creations a minute per org)',
      tag,
      params: z.object({ secret_id: idParam.describe("The version's id, as a read or PUT returns it") }),
      body: CreateShareBody,
      headers: { 'X-Passkey-Token': 'A passkey unlock, for accounts that require one for secret reads' },
      responses: { 201: { description: 'The share and its public link', schema: CreatedShareResponse } },
    },
    async (req, res, { params, body }) => {
      const r = await call(vc.createShare, {
        secretId: params.secret_id,
        passkeyToken: req.header('x-passkey-token') ?? '',
        recipientType: body.recipient_type,
        recipientId: body.recipient_id ?? undefined,
        email: body.email ?? undefined,
        expiresAt: body.expires_at,
        maxAccessCount: body.max_access_count ?? undefined,
        passphrase: body.passphrase ?? undefined,
        ipAllowlist: body.ip_allowlist ?? [],
      });
      const s = shareListItem(must(r.share, 'share'));
      res
        .status(201)
        .json({ ...s, share_url: shareUrl(req, s.id, r.linkSecret) } satisfies z.infer<
          typeof CreatedShareResponse
        >);
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/shares/outbound',
      access: 'authenticated',
      summary: 'The shares the caller created',
      tag,
      responses: { 200: { description: 'Newest first', schema: SharesResponse } },
    },
    async (_req, res) => {
      const r = await call(vc.listOutboundShares, {});
      res.json({ shares: r.shares.map(shareListItem) });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/shares/inbound',
      access: 'authenticated',
      summary: 'The shares addressed to the caller',
      tag,
      responses: { 200: { description: 'Newest first', schema: SharesResponse } },
    },
    async (_req, res) => {
      const r = await call(vc.listInboundShares, {});
      res.json({ shares: r.shares.map(shareListItem) });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/shares/:share_id/accept',
      access: 'authenticated',
      summary: 'Accept a share addressed to the caller (recipient only)',
      tag,
      params: shareParams,
      responses: { 204: { description: 'Accepted' } },
    },
    async (_req, res, { params }) => {
      await call(vc.acceptShare, { shareId: params.share_id });
      res.status(204).end();
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/shares/:share_id/decline',
      access: 'authenticated',
      summary: 'Decline a share addressed to the caller; it no longer opens',
      tag,
      params: shareParams,
      responses: { 204: { description: 'Declined' } },
    },
    async (_req, res, { params }) => {
      await call(vc.declineShare, { shareId: params.share_id });
      res.status(204).end();
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'delete',
      path: '/v1/share/:share_id',
      access: 'authenticated',
      summary: 'Revoke a share (its creator or an org owner or admin)',
      tag,
      params: shareParams,
      responses: { 204: { description: 'Revoked' } },
    },
    async (_req, res, { params }) => {
      await call(vc.revokeShare, { shareId: params.share_id });
      res.status(204).end();
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/share/:share_id',
      noHead: true,
      access: 'public',
      summary:
        "Open a share with its link (id and `key`): no token needed unless it names a recipient (that recipient's token)",
      tag,
      params: shareParams,
      query: shareKeyQuery,
      headers: {
        [SHARE_PASSPHRASE_HEADER]: "The share's passphrase, when it has one",
        [SHARE_KEY_HEADER]: 'The link secret, when not in the `key` query parameter',
      },
      responses: { 200: { description: 'The shared version and its value', schema: OpenedShareResponse } },
    },
    async (req, res, { params, query }) => {
      noStore(res);
      // The id alone opens nothing: without the link secret vault-crypto answers 404.
      const r = await call(vc.accessShare, {
        shareId: params.share_id,
        linkSecret: query.key ?? req.header(SHARE_KEY_HEADER) ?? '',
        passphrase: req.header(SHARE_PASSPHRASE_HEADER) ?? '',
      });
      const s = must(r.share, 'share');
      res.json({
        id: s.secretId,
        share_id: s.id,
        path: s.secretPath,
        type: r.type,
        version: r.version,
        value: r.value,
        value_encoding: r.valueEncoding as 'utf8' | 'base64',
        access_count: Number(s.accessCount),
        max_access_count: Number(s.maxAccessCount),
        expires_at: s.expiresAt,
      } satisfies z.infer<typeof OpenedShareResponse>);
    },
  );

  return router;
}
