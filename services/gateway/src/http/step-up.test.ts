import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import type { AccountServiceClient, ConfirmStepUpRequest } from '@custos/proto/custos/identity/v1/account';
import { CustosError, PermissionDeniedError, createLogger, toGrpcStatus } from '@custos/service-kit';
import { errorHandler } from './problem';
import { requireStepUp } from './step-up';

type Callback = (err: unknown, res?: unknown) => void;

/** An AccountService client whose ConfirmStepUp answers like identity: a rat_ "ok" passes, all else is refused. */
function fakeAccount(calls: ConfirmStepUpRequest[]): AccountServiceClient {
  const client = {
    getChannel: () => ({ getTarget: () => 'identity' }),
    confirmStepUp(req: ConfirmStepUpRequest, _md: unknown, _opts: unknown, cb: Callback) {
      calls.push(req);
      if (req.credential === 'rat_ok') return cb(null, {});
      if (req.credential === 'locked') {
        return cb(
          toGrpcStatus(
            new CustosError('rate_limited', { detail: 'locked', extensions: { retry_after: '840' } }),
          ),
        );
      }
      cb(
        toGrpcStatus(
          new PermissionDeniedError('re-authenticate', {
            type: 'step_up_required',
            extensions: { purpose: req.purpose },
          }),
        ),
      );
    },
  };
  return client as unknown as AccountServiceClient;
}

describe('requireStepUp', () => {
  let server: Server;
  let base: string;
  const calls: ConfirmStepUpRequest[] = [];

  beforeAll(async () => {
    const app = express();
    app.post('/guarded', requireStepUp(fakeAccount(calls), 'security.passkey.delete'), (_req, res) => {
      res.json({ reached: true });
    });
    app.use(errorHandler(createLogger({ service: 'gateway-test', level: 'silent' })));
    server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise((r) => server.close(r)));
  beforeEach(() => calls.splice(0));

  const post = (confirm?: string) =>
    fetch(`${base}/guarded`, { method: 'POST', headers: confirm ? { 'x-auth-confirm': confirm } : {} });

  it('lets the request through when identity confirms the X-Auth-Confirm value for the purpose', async () => {
    const r = await post('rat_ok');
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ reached: true });
    expect(calls).toEqual([{ purpose: 'security.passkey.delete', credential: 'rat_ok' }]);
  });

  it('answers a refused or missing step-up with 403 step_up_required naming the purpose', async () => {
    for (const confirm of [undefined, 'wrong password']) {
      const r = await post(confirm);
      expect(r.status).toBe(403);
      expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(await r.json()).toMatchObject({
        type: 'step_up_required',
        status: 403,
        purpose: 'security.passkey.delete',
      });
    }
    expect(calls.map((c) => c.credential)).toEqual(['', 'wrong password']);
  });

  it('passes the re-auth lockout on as 429 with Retry-After', async () => {
    const r = await post('locked');
    expect(r.status).toBe(429);
    expect(r.headers.get('retry-after')).toBe('840');
  });
});
