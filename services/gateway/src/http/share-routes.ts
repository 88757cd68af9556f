import type { Request, RequestHandler, Response } from 'express';
import { Router } from 'express';
import type { Share } from '@custos/proto/custos/vault_crypto/v1/shares';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { body } from './auth-routes.js';
import { declareUncheckedRoute } from './routes.js';
import { setRetryAfter } from './step-up.js';

type Guards = { authenticated: RequestHandler[]; human: RequestHandler[] };

/** The header a share's passphrase travels in (never a query parameter: URLs end up in logs). */
export const SHARE_PASSPHRASE_HEADER = 'X-Share-Passphrase';

/** The reference's ShareListItem, with the share's other facts (never its passphrase). */
export function shareListItem(s: Share | undefined) {
  return {
    id: s?.id,
    secret_id: s?.secretId,
    vault_id: s?.vaultId,
    secret_path: s?.secretPath,
    recipient_type: s?.recipientType,
    recipient_id: s?.recipientId || null,
    recipient_email: s?.recipientEmail || null,
    access_count: Number(s?.accessCount ?? 0),
    max_access_count: Number(s?.maxAccessCount ?? 0),
    expires_at: s?.expiresAt,
    created_at: s?.createdAt,
    created_by: s?.createdBy,
    created_by_type: s?.createdByType,
    has_passphrase: s?.hasPassphrase ?? false,
    ip_allowlist: s?.ipAllowlist.length ? s.ipAllowlist : null,
    is_expired: s?.isExpired ?? false,
    is_accepted: s?.isAccepted ?? false,
    is_declined: s?.isDeclined ?? false,
    is_revoked: s?.isRevoked ?? false,
  };
}

/** The public link of a share, at the address the request came in on. */
function shareUrl(req: Request, id: string): string {
  return `${req.protocol}://${req.get('host') ?? 'localhost'}/v1/share/${encodeURIComponent(id)}`;
}

const noStore = (res: Response) => res.setHeader('Cache-Control', 'no-store');

/**
 * Secret sharing (SPEC §4.6, docs/decisions.md "Sharing"). `GET /v1/share/{id}` is public (spec
 * §5.11: no auth stage, no IP filter); vault-crypto checks the recipient's token when the share
 * names one, the share's own IP allowlist, its passphrase, expiry and access count.
 */
export function shareRoutes(peers: Peers, guards: Guards): Router {
  const router = Router();
  const vc = peers.vaultCrypto;
  const call = unaryCaller(vc);
  const id = (req: Request) => String(req.params['share_id']);

  declareUncheckedRoute(
    router,
    guards,
    'post',
    '/v1/secrets/:secret_id/share',
    'authenticated',
    async (req, res) => {
      try {
        const r = await call(vc.createShare, {
          secretId: String(req.params['secret_id']),
          fields: body(req),
          passkeyToken: req.header('x-passkey-token') ?? '',
        });
        const s = shareListItem(r.share);
        res.status(201).json({ ...s, share_url: shareUrl(req, String(s.id)) });
      } catch (err) {
        setRetryAfter(res, err);
        throw err;
      }
    },
  );

  declareUncheckedRoute(router, guards, 'get', '/v1/shares/outbound', 'authenticated', async (_req, res) => {
    const r = await call(vc.listOutboundShares, {});
    res.json({ shares: r.shares.map(shareListItem) });
  });

  declareUncheckedRoute(router, guards, 'get', '/v1/shares/inbound', 'authenticated', async (_req, res) => {
    const r = await call(vc.listInboundShares, {});
    res.json({ shares: r.shares.map(shareListItem) });
  });

  declareUncheckedRoute(
    router,
    guards,
    'post',
    '/v1/shares/:share_id/accept',
    'authenticated',
    async (req, res) => {
      await call(vc.acceptShare, { shareId: id(req) });
      res.status(204).end();
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'post',
    '/v1/shares/:share_id/decline',
    'authenticated',
    async (req, res) => {
      await call(vc.declineShare, { shareId: id(req) });
      res.status(204).end();
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'delete',
    '/v1/share/:share_id',
    'authenticated',
    async (req, res) => {
      await call(vc.revokeShare, { shareId: id(req) });
      res.status(204).end();
    },
  );

  declareUncheckedRoute(router, guards, 'get', '/v1/share/:share_id', 'public', async (req, res) => {
    noStore(res);
    const r = await call(vc.accessShare, {
      shareId: id(req),
      passphrase: req.header(SHARE_PASSPHRASE_HEADER) ?? '',
    });
    const s = r.share;
    res.json({
      id: s?.secretId,
      share_id: s?.id,
      path: s?.secretPath,
      type: r.type,
      version: r.version,
      value: r.value,
      value_encoding: r.valueEncoding,
      access_count: Number(s?.accessCount ?? 0),
      max_access_count: Number(s?.maxAccessCount ?? 0),
      expires_at: s?.expiresAt,
    });
  });

  return router;
}
