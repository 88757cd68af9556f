import { createHash } from 'node:crypto';
import express, {
  type ErrorRequestHandler,
  type Request,
  type RequestHandler,
  type Response,
  Router,
} from 'express';
import type { Redis } from 'ioredis';
import { AccountServiceClient } from '@custos/proto/custos/identity/v1/account';
import { CustosError, RateLimitedError, describeError, unaryCaller, type Logger } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from './problem.js';
import { rateLimit } from './rate-limit.js';

// The pages the links of Custos's e-mails open (`/verify-email?token=…`, `/reset-password?token=…`,
// `/undo-email-change?token=…`).
// A GET only shows a form with the token filled in: link scanners and previews that fetch the URL
// spend nothing. The form posts back to the same path (no JavaScript), and the page says how it
// went. These are not `/v1` API routes and are not in the route table or the OpenAPI document.

const STYLE =
  'body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem}' +
  'input{font:inherit;width:100%;box-sizing:border-box;margin:.25rem 0 1rem}';
const STYLE_HASH = createHash('sha256').update(STYLE).digest('base64');

/** Nothing loads but the one inline style; the form may post only here; no framing. */
export const PAGE_CSP = [
  "default-src 'none'",
  `style-src 'sha256-${STYLE_HASH}'`,
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

/** Text made safe for HTML content and attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(
    /[&<>"'`]/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' })[c]!,
  );
}

/** One page; `body` is HTML the caller built from escaped parts. */
function page(title: string, body: string): string {
  return (
    '<!doctype html><html lang="en"><head><meta charset="utf-8">' +
    '<meta name="viewport" content="width=device-width,initial-scale=1">' +
    `<meta name="referrer" content="no-referrer"><title>${escapeHtml(title)} - Custos</title>` +
    `<style>${STYLE}</style></head><body><h1>${escapeHtml(title)}</h1>${body}</body></html>`
  );
}

function send(res: Response, status: number, title: string, body: string): void {
  res
    .status(status)
    .set({
      'Content-Type': 'text/html; charset=utf-8',
      'Cache-Control': 'no-store',
      'Content-Security-Policy': PAGE_CSP,
      'Referrer-Policy': 'no-referrer',
      'X-Content-Type-Options': 'nosniff',
    })
    .send(page(title, body));
}

/** A form field's value: the first when repeated, '' when absent. */
function field(source: unknown, name: string): string {
  const v = (source as Record<string, unknown> | undefined)?.[name];
  const first = Array.isArray(v) ? v[0] : v;
  return typeof first === 'string' ? first : '';
}

const paragraph = (text: string) => `<p>${escapeHtml(text)}</p>`;

function tokenInput(token: string): string {
  return (
    '<label for="token">Token from the e-mail</label>' +
    `<input id="token" name="token" required autocomplete="off" value="${escapeHtml(token)}">`
  );
}

/** What the pages need of the app's dependencies (AppDeps fits). */
export interface PageDeps {
  peers: Peers;
  logger: Logger;
  redis: Redis;
  /** The stricter per-client limit of credential routes; the POSTs check a token, so they share it. */
  authRateLimit?: { ratePerSecond: number; burst: number };
}

/** The e-mail verification, password-reset and e-mail-change undo pages. */
export function pageRoutes(deps: PageDeps): Router {
  const router = Router();
  const account = deps.peers.client(AccountServiceClient, 'identity');
  const identity = deps.peers.identity;
  const callIdentity = unaryCaller(identity);
  const callAccount = unaryCaller(account);
  const form = express.urlencoded({ extended: false, limit: '16kb', parameterLimit: 10 });
  const limits: RequestHandler[] = deps.authRateLimit
    ? [
        rateLimit({
          redis: deps.redis,
          ...deps.authRateLimit,
          logger: deps.logger,
          scope: 'auth',
          failClosed: true,
        }),
      ]
    : [];
  const posts = [...limits, form];

  const verifyForm = (token: string) =>
    '<form method="post" action="/verify-email">' +
    tokenInput(token) +
    '<button type="submit">Verify my e-mail address</button></form>';

  router.get('/verify-email', (req, res) => {
    send(res, 200, 'Verify your e-mail address', verifyForm(field(req.query, 'token')));
  });

  router.post('/verify-email', ...posts, async (req: Request, res: Response, next) => {
    try {
      // The page has nowhere to keep tokens: verify without starting a session.
      await callIdentity(identity.verifyEmail, { token: field(req.body, 'token'), withoutSession: true });
      send(res, 200, 'E-mail address verified', paragraph('Your address is verified. You can sign in now.'));
    } catch (err) {
      next(err);
    }
  });

  const resetForm = (token: string) =>
    '<form method="post" action="/reset-password">' +
    tokenInput(token) +
    '<label for="new_password">New password</label>' +
    '<input id="new_password" name="new_password" type="password" required autocomplete="new-password">' +
    paragraph('At least 12 characters, with upper and lower case letters, a digit and a symbol.') +
    '<button type="submit">Set the new password</button></form>';

  router.get('/reset-password', (req, res) => {
    send(res, 200, 'Choose a new password', resetForm(field(req.query, 'token')));
  });

  router.post('/reset-password', ...posts, async (req: Request, res: Response, next) => {
    try {
      const r = await callAccount(account.resetPassword, {
        token: field(req.body, 'token'),
        newPassword: field(req.body, 'new_password'),
      });
      send(res, 200, 'Password updated', paragraph(r.message));
    } catch (err) {
      next(err);
    }
  });

  const undoForm = (token: string) =>
    '<form method="post" action="/undo-email-change">' +
    tokenInput(token) +
    paragraph(
      'This gives the account back its previous e-mail address and signs out every session and ' +
        'personal API key. Then reset your password.',
    ) +
    '<button type="submit">Undo the e-mail change</button></form>';

  router.get('/undo-email-change', (req, res) => {
    send(res, 200, 'Undo the e-mail change', undoForm(field(req.query, 'token')));
  });

  router.post('/undo-email-change', ...posts, async (req: Request, res: Response, next) => {
    try {
      const r = await callAccount(account.undoEmailChange, { token: field(req.body, 'token') });
      send(res, 200, 'E-mail change undone', paragraph(r.message));
    } catch (err) {
      next(err);
    }
  });

  // A refusal shows identity's message (it never names a secret) with the form again, so the
  // user can correct it; anything else shows a generic page.
  const failed =
    (again: (token: string) => string): ErrorRequestHandler =>
    (err: unknown, req, res, _next) => {
      const token = field(req.body, 'token');
      if (err instanceof CustosError) {
        if (err instanceof RateLimitedError) res.setHeader('Retry-After', String(err.retryAfterSeconds));
        else if (err.kind === 'unavailable') res.setHeader('Retry-After', UNAVAILABLE_RETRY_AFTER_SECONDS);
        const retry = err.httpStatus < 500 && !(err instanceof RateLimitedError);
        send(res, err.httpStatus, 'That did not work', paragraph(err.detail) + (retry ? again(token) : ''));
        return;
      }
      const status = (err as { status?: unknown } | undefined)?.status;
      if (typeof status === 'number' && status >= 400 && status < 500) {
        send(res, status, 'That did not work', paragraph('The form could not be read.') + again(''));
        return;
      }
      deps.logger.error({ err: describeError(err) }, 'unhandled error in a page');
      send(res, 500, 'That did not work', paragraph('Something went wrong on our side. Try again later.'));
    };
  router.use('/verify-email', failed(verifyForm));
  router.use('/reset-password', failed(resetForm));
  router.use('/undo-email-change', failed(undoForm));

  return router;
}
