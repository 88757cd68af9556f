import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import type { Redis } from 'ioredis';
import { InvalidArgumentError, createLogger, toGrpcStatus } from '@custos/service-kit';
import type { Peers } from '../peers';
import { PAGE_CSP, escapeHtml, pageRoutes } from './page-routes';

type Callback = (err: unknown, res?: unknown) => void;
const GOOD = 'cse_0123456789abcdef_good';

/** Identity's two RPCs the pages call, answering like identity: one token works, others are 400. */
function fakePeers(calls: Array<[string, unknown]>): Peers {
  const channel = { getChannel: () => ({ getTarget: () => 'identity' }) };
  const refuse = (cb: Callback) =>
    cb(toGrpcStatus(new InvalidArgumentError('token', 'invalid or expired <token>')));
  const identity = {
    ...channel,
    verifyEmail(
      req: { token: string; withoutSession?: boolean },
      _md: unknown,
      _opts: unknown,
      cb: Callback,
    ) {
      calls.push(['verifyEmail', req]);
      if (req.token !== GOOD) return refuse(cb);
      if (req.withoutSession) return cb(null, {});
      cb(null, { tokens: { accessToken: 'a', tokenType: 'Bearer', expiresIn: 900, refreshToken: 'r' } });
    },
  };
  const account = {
    ...channel,
    resetPassword(req: { token: string; newPassword: string }, _md: unknown, _opts: unknown, cb: Callback) {
      calls.push(['resetPassword', req]);
      if (req.token !== GOOD) return refuse(cb);
      cb(null, { message: 'Password updated. Sign in with the new password.' });
    },
  };
  return { identity, client: () => account } as unknown as Peers;
}

describe('e-mail link pages', () => {
  let server: Server;
  let base: string;
  const calls: Array<[string, unknown]> = [];

  beforeAll(async () => {
    const app = express();
    app.use(express.json());
    app.use(
      pageRoutes({
        peers: fakePeers(calls),
        logger: createLogger({ service: 'gateway-test', level: 'silent' }),
        redis: undefined as unknown as Redis,
      }),
    );
    server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise((r) => server.close(r)));
  beforeEach(() => calls.splice(0));

  const post = (path: string, form: Record<string, string>) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(form).toString(),
    });

  function expectPageHeaders(r: Response) {
    expect(r.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(r.headers.get('cache-control')).toBe('no-store');
    expect(r.headers.get('content-security-policy')).toBe(PAGE_CSP);
    expect(r.headers.get('referrer-policy')).toBe('no-referrer');
  }

  it('escapes every character that could leave text or an attribute', () => {
    expect(escapeHtml(`<a href="x" onclick='y'>&\``)).toBe(
      '&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&#96;',
    );
  });

  it('shows the verification form with the token filled in, escaped, and calls nobody on GET', async () => {
    const hostile = `${GOOD}"><script>alert(1)</script>`;
    const r = await fetch(`${base}/verify-email?token=${encodeURIComponent(hostile)}`);
    expect(r.status).toBe(200);
    expectPageHeaders(r);
    const html = await r.text();
    expect(html).toContain('<form method="post" action="/verify-email">');
    expect(html).toContain(`value="${escapeHtml(hostile)}"`);
    expect(html).not.toContain('<script>');
    expect(PAGE_CSP).toMatch(/default-src 'none'/);
    expect(calls).toEqual([]);
  });

  it('verifies on the form post and says so, without showing any token', async () => {
    const r = await post('/verify-email', { token: GOOD });
    expect(r.status).toBe(200);
    expectPageHeaders(r);
    const html = await r.text();
    expect(html).toContain('E-mail address verified');
    expect(html).not.toMatch(/Bearer|refresh/);
    expect(calls).toEqual([['verifyEmail', { token: GOOD, withoutSession: true }]]);
  });

  it('answers a refused token with its status, the escaped reason and the form again', async () => {
    const r = await post('/verify-email', { token: 'cse_nope' });
    expect(r.status).toBe(400);
    expectPageHeaders(r);
    const html = await r.text();
    expect(html).toContain('invalid or expired &lt;token&gt;');
    expect(html).toContain('value="cse_nope"');
  });

  it('shows the reset form and sets the new password from its post', async () => {
    const get = await fetch(`${base}/reset-password?token=${GOOD}`);
    expect(get.status).toBe(200);
    expectPageHeaders(get);
    const form = await get.text();
    expect(form).toContain('<form method="post" action="/reset-password">');
    expect(form).toContain(`value="${GOOD}"`);
    expect(form).toContain('type="password"');

    const r = await post('/reset-password', { token: GOOD, new_password: 'Correct-Horse-9-battery' });
    expect(r.status).toBe(200);
    expect(await r.text()).toContain('Password updated. Sign in with the new password.');
    expect(calls).toEqual([['resetPassword', { token: GOOD, newPassword: 'Correct-Horse-9-battery' }]]);

    const bad = await post('/reset-password', { token: 'cse_nope', new_password: 'x' });
    expect(bad.status).toBe(400);
    const again = await bad.text();
    expect(again).toContain('name="new_password"');
    expect(again).not.toContain('value="x"');
  });
});
