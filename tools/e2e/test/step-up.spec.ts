import { randomBytes } from 'node:crypto';
import { type CapturedMessage, type SmtpCapture } from '@custos/testing';
import { TEST_PASSWORD, api, quickUser } from '../src/api';
import { currentStep, totp } from '../src/totp';
import { sqlOn } from '../src/db';
import type { GoogleIdp } from '../src/google-idp';
import { sharedGoogleIdp, sharedMail, sharedMesh, type Mesh } from '../src/mesh';

type Answer = Awaited<ReturnType<typeof api>>;

const ACCEPTED = ['reauth_token', 'password', 'totp'];
const UNDO_TOKEN = /cse_[A-Za-z0-9]{16}_[A-Za-z0-9]{43}/;

// Issue 16: step-up on sensitive routes (SPEC.md §5.9) — the gateway's 401 challenge before any
// service is called, the owning service's own check of X-Auth-Confirm (403 when it fails,
// audited) — and the notice with a 7-day undo link that an e-mail change sends the old address.
describe('step-up on sensitive routes, and the undo of an e-mail change', () => {
  let mesh: Mesh;
  let smtp: SmtpCapture;
  let idp: GoogleIdp;
  const taken = new Set<CapturedMessage>();

  beforeAll(async () => {
    mesh = await sharedMesh();
    smtp = sharedMail();
    // The Google stand-in the shared meshes trust (see federation.spec.ts).
    idp = sharedGoogleIdp('custos-e2e.apps.googleusercontent.com');
  });
  afterAll(async () => {
    await mesh?.stop();
    await smtp?.close();
    await idp?.close();
  });

  const newEmail = () => `stepup-${randomBytes(5).toString('hex')}@example.com`;

  async function nextMail(to: string): Promise<CapturedMessage> {
    const m = await smtp.waitForMessage((x) => x.to === to && !taken.has(x), 10000);
    taken.add(m);
    return m;
  }

  async function rat(token: string, purpose: string): Promise<string> {
    const r = await api(mesh, 'POST', '/v1/auth/reauth', {
      token,
      body: { purpose, password: TEST_PASSWORD },
    });
    expect(r.status).toBe(200);
    return r.body['token'] as string;
  }

  function expectChallenge(r: Answer, purpose: string): void {
    expect(r.status).toBe(401);
    expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(r.body).toMatchObject({ status: 401, type: 'step_up_required', purpose, accepted: ACCEPTED });
  }

  function expectRefused(r: Answer, purpose: string): void {
    expect(r.status).toBe(403);
    expect(r.body).toMatchObject({ status: 403, type: 'step_up_required', purpose });
  }

  /** identity's audit records of refused step-ups of a user for a purpose. */
  async function refusalsOf(userId: string, purpose: string): Promise<number> {
    const rows = await sqlOn<{ n: number }>(
      mesh,
      `select count(*)::int as n from identity.outbox where name = 'audit.recorded'
         and payload->>'action' = 'auth.reauth_failed' and payload->>'resource_id' = $1
         and payload->'metadata'->>'purpose' = $2`,
      [userId, purpose],
    );
    return rows[0]!.n;
  }

  const pendingChanges = async (userId: string) =>
    (
      await sqlOn<{ n: number }>(
        mesh,
        'select count(*)::int as n from identity.email_changes where user_id = $1',
        [userId],
      )
    )[0]!.n;

  describe('change-email', () => {
    const purpose = 'account.email.change';

    it('challenges without X-Auth-Confirm (401) and refuses a wrong or misused credential (403), changing nothing', async () => {
      const u = await quickUser(mesh);
      const to = newEmail();
      const body = { new_email: to };

      expectChallenge(await api(mesh, 'POST', '/v1/auth/change-email', { token: u.token, body }), purpose);
      expect(await pendingChanges(u.userId)).toBe(0);

      const before = await refusalsOf(u.userId, purpose);
      const wrong = await api(mesh, 'POST', '/v1/auth/change-email', {
        token: u.token,
        body,
        confirm: `${TEST_PASSWORD}x`,
      });
      expectRefused(wrong, purpose);
      expect(await refusalsOf(u.userId, purpose)).toBe(before + 1);

      const otherPurpose = await rat(u.token, 'account.api_key.create');
      expectRefused(
        await api(mesh, 'POST', '/v1/auth/change-email', { token: u.token, body, confirm: otherPurpose }),
        purpose,
      );
      const stranger = await quickUser(mesh);
      expectRefused(
        await api(mesh, 'POST', '/v1/auth/change-email', {
          token: u.token,
          body,
          confirm: await rat(stranger.token, purpose),
        }),
        purpose,
      );
      expect(await refusalsOf(u.userId, purpose)).toBe(before + 3);
      expect(await pendingChanges(u.userId)).toBe(0);
      expect((await api(mesh, 'GET', '/v1/auth/me', { token: u.token })).body['email']).toBe(u.email);
      // The refused rat_ of the other purpose was not spent: it still creates a key.
      const key = await api(mesh, 'POST', '/v1/auth/api-keys', {
        token: u.token,
        body: { name: 'k' },
        confirm: otherPurpose,
      });
      expect(key.status).toBe(201);
    });

    it('changes with a rat_ token once; the old address is told and its link undoes the change, ending sessions and keys', async () => {
      const u = await quickUser(mesh);
      const key = await api(mesh, 'POST', '/v1/auth/api-keys', {
        token: u.token,
        body: { name: 'before' },
        confirm: TEST_PASSWORD,
      });
      expect(key.status).toBe(201);
      const session = await api(mesh, 'POST', '/v1/auth/token', {
        body: { email: u.email, password: TEST_PASSWORD },
      });
      expect(session.status).toBe(200);

      const to = newEmail();
      const t = await rat(u.token, purpose);
      const started = await api(mesh, 'POST', '/v1/auth/change-email', {
        token: u.token,
        body: { new_email: to },
        confirm: t,
      });
      expect(started.status).toBe(200);
      const again = await api(mesh, 'POST', '/v1/auth/change-email', {
        token: u.token,
        body: { new_email: newEmail() },
        confirm: t,
      });
      expectRefused(again, purpose);

      const code = /\b(\d{6})\b/.exec((await nextMail(to)).text)![1]!;
      const verified = await api(mesh, 'POST', '/v1/auth/verify-email-change', {
        token: u.token,
        body: { code },
      });
      expect(verified.status).toBe(200);
      expect(verified.body).toMatchObject({ email: to });

      const notice = await nextMail(u.email);
      expect(notice.subject).toBe('The e-mail address of your Custos account was changed');
      expect(notice.text).not.toContain(to);
      const undo = UNDO_TOKEN.exec(notice.text)?.[0];
      expect(undo).toBeDefined();
      expect(notice.text).toContain(`https://custos.test/undo-email-change?token=${undo!}`);
      expect(notice.text).toContain('7 days');

      // Only a hash of the undo token is stored.
      const stored = await sqlOn<{ secret_hash: string; restore_email: string }>(
        mesh,
        `select secret_hash, restore_email from identity.email_tokens where id = $1`,
        [undo!.split('_')[1]],
      );
      expect(stored).toEqual([{ secret_hash: expect.any(String), restore_email: u.email }]);
      expect(stored[0]!.secret_hash).not.toContain(undo!.split('_')[2]);

      // A forged secret is refused and spends nothing.
      const forged = `${undo!.slice(0, -1)}${undo!.endsWith('a') ? 'b' : 'a'}`;
      const bad = await api(mesh, 'POST', '/v1/auth/undo-email-change', { body: { token: forged } });
      expect(bad.status).toBe(400);
      expect(bad.body).toMatchObject({ status: 400, field: 'token' });

      const undone = await api(mesh, 'POST', '/v1/auth/undo-email-change', { body: { token: undo } });
      expect(undone.status).toBe(200);
      expect(undone.body).toMatchObject({ email: u.email });

      // The address is back; every token, session and personal key of the account ended.
      expect((await api(mesh, 'GET', '/v1/auth/me', { token: u.token })).status).toBe(401);
      expect(
        (await api(mesh, 'GET', '/v1/auth/me', { token: session.body['access_token'] as string })).status,
      ).toBe(401);
      expect(
        (
          await api(mesh, 'POST', '/v1/auth/refresh', {
            body: { refresh_token: session.body['refresh_token'] },
          })
        ).status,
      ).toBe(401);
      expect(
        (await api(mesh, 'POST', '/v1/auth/api-key-token', { body: { api_key: key.body['api_key'] } }))
          .status,
      ).toBe(401);
      const back = await api(mesh, 'POST', '/v1/auth/token', {
        body: { email: u.email, password: TEST_PASSWORD },
      });
      expect(back.status).toBe(200);
      expect(
        (await api(mesh, 'GET', '/v1/auth/me', { token: back.body['access_token'] as string })).body['email'],
      ).toBe(u.email);
      expect(
        (await api(mesh, 'POST', '/v1/auth/token', { body: { email: to, password: TEST_PASSWORD } })).status,
      ).toBe(401);

      // Once only.
      const twice = await api(mesh, 'POST', '/v1/auth/undo-email-change', { body: { token: undo } });
      expect(twice.status).toBe(400);
      const audited = await sqlOn<{ n: number }>(
        mesh,
        `select count(*)::int as n from identity.outbox where name = 'audit.recorded'
           and payload->>'action' = 'email.change_undone' and payload->>'resource_id' = $1`,
        [u.userId],
      );
      expect(audited[0]!.n).toBe(1);
    });
  });

  it('API key creation: 401 without a step-up (no key made), 201 with a rat_ token for it', async () => {
    const u = await quickUser(mesh);
    const purpose = 'account.api_key.create';
    const body = { name: 'ci' };
    expectChallenge(await api(mesh, 'POST', '/v1/auth/api-keys', { token: u.token, body }), purpose);
    expectRefused(
      await api(mesh, 'POST', '/v1/auth/api-keys', { token: u.token, body, confirm: `${TEST_PASSWORD}x` }),
      purpose,
    );
    expect((await api(mesh, 'GET', '/v1/auth/api-keys', { token: u.token })).body['keys']).toEqual([]);
    const ok = await api(mesh, 'POST', '/v1/auth/api-keys', {
      token: u.token,
      body,
      confirm: await rat(u.token, purpose),
    });
    expect(ok.status).toBe(201);
  });

  it('MFA enrolment: 401 without a step-up, 200 with a rat_; then a TOTP code is a step-up once, not twice', async () => {
    const u = await quickUser(mesh);
    expectChallenge(await api(mesh, 'POST', '/v1/auth/mfa/setup', { token: u.token }), 'security.mfa.enrol');
    const setup = await api(mesh, 'POST', '/v1/auth/mfa/setup', {
      token: u.token,
      confirm: await rat(u.token, 'security.mfa.enrol'),
    });
    expect(setup.status).toBe(200);
    const secret = setup.body['secret'] as string;
    const step = currentStep();
    const enrolled = await api(mesh, 'POST', '/v1/auth/mfa/verify-setup', {
      token: u.token,
      body: { code: totp(secret, step) },
    });
    expect(enrolled.status).toBe(200);

    // The next step's code (inside the ±1 window) has not been used: it proves the user once.
    const code = totp(secret, step + 1);
    const purpose = 'account.api_key.create';
    const first = await api(mesh, 'POST', '/v1/auth/api-keys', {
      token: u.token,
      body: { name: 'by-totp' },
      confirm: code,
    });
    expect(first.status).toBe(201);
    const before = await refusalsOf(u.userId, purpose);
    expectRefused(
      await api(mesh, 'POST', '/v1/auth/api-keys', {
        token: u.token,
        body: { name: 'again' },
        confirm: code,
      }),
      purpose,
    );
    expect(await refusalsOf(u.userId, purpose)).toBe(before + 1);
    const keys = (await api(mesh, 'GET', '/v1/auth/api-keys', { token: u.token })).body['keys'] as unknown[];
    expect(keys).toHaveLength(1);
    // The same code cannot be turned into a rat_ either.
    const asRat = await api(mesh, 'POST', '/v1/auth/reauth', {
      token: u.token,
      body: { purpose, totp_code: code },
    });
    expect(asRat.status).toBe(403);
  });

  it('org key rotation: 401 without a step-up; a wrong credential is refused by vault-crypto (through identity); a rat_ rotates', async () => {
    const u = await quickUser(mesh);
    const purpose = 'org.encryption_key.rotate';
    // A secret makes the org's key (version 1).
    const v = await api(mesh, 'POST', '/v1/vaults', { token: u.token, body: { name: 'kek' } });
    expect(v.status).toBe(201);
    const put = await api(mesh, 'PUT', `/v1/vaults/${v.body['id'] as string}/secrets/one`, {
      token: u.token,
      body: { value: 'x' },
    });
    expect(put.status).toBeLessThan(300);
    expectChallenge(await api(mesh, 'POST', '/v1/org/encryption-key/rotate', { token: u.token }), purpose);
    // The gateway only checks that a credential is there; vault-crypto asks identity to check it.
    const before = await refusalsOf(u.userId, purpose);
    expectRefused(
      await api(mesh, 'POST', '/v1/org/encryption-key/rotate', {
        token: u.token,
        confirm: `${TEST_PASSWORD}x`,
      }),
      purpose,
    );
    expectRefused(
      await api(mesh, 'POST', '/v1/org/encryption-key/rotate', {
        token: u.token,
        confirm: await rat(u.token, 'account.delete'),
      }),
      purpose,
    );
    expect(await refusalsOf(u.userId, purpose)).toBe(before + 2);
    const t = await rat(u.token, purpose);
    const rotated = await api(mesh, 'POST', '/v1/org/encryption-key/rotate', { token: u.token, confirm: t });
    expect(rotated.status).toBe(200);
    // Version 2: none of the refusals rotated the key.
    expect(rotated.body).toEqual({ version: 2 });
    expectRefused(
      await api(mesh, 'POST', '/v1/org/encryption-key/rotate', { token: u.token, confirm: t }),
      purpose,
    );
  });

  it('the OpenAPI document names the step-up header and its 401 on every step-up route', async () => {
    const doc = (await api(mesh, 'GET', '/v1/openapi.json')).body as {
      paths: Record<
        string,
        Record<string, { parameters?: Array<{ name: string; in: string; required: boolean }> }>
      >;
    };
    for (const [path, method] of [
      ['/v1/auth/change-email', 'post'],
      ['/v1/auth/change-password', 'post'],
      ['/v1/auth/set-password', 'post'],
      ['/v1/auth/api-keys', 'post'],
      ['/v1/auth/mfa/setup', 'post'],
      ['/v1/auth/mfa/disable', 'post'],
      ['/v1/agents/{agent_id}/rotate-key', 'post'],
      ['/v1/org/members/{user_id}', 'patch'],
      ['/v1/org/encryption-key/rotate', 'post'],
      ['/v1/auth/me', 'delete'],
    ] as const) {
      const op = doc.paths[path]?.[method];
      expect(op?.parameters).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ name: 'X-Auth-Confirm', in: 'header', required: true }),
        ]),
      );
      expect(JSON.stringify(op)).toContain('step_up_required');
    }
  });

  it('a Google-only account (no password, no TOTP) sets its first password with a rat_ its fresh sign-in earns', async () => {
    const email = newEmail();
    const signedIn = await api(mesh, 'POST', '/v1/auth/google', { body: { id_token: idp.idToken(email) } });
    expect(signedIn.status).toBe(200);
    const token = signedIn.body['access_token'] as string;
    const purpose = 'account.password.set';
    const body = { password: 'Fresh-Horse-4-battery', password_confirm: 'Fresh-Horse-4-battery' };
    expectChallenge(await api(mesh, 'POST', '/v1/auth/set-password', { token, body }), purpose);
    // It has no password to confirm with.
    expectRefused(
      await api(mesh, 'POST', '/v1/auth/set-password', { token, body, confirm: TEST_PASSWORD }),
      purpose,
    );
    const r = await api(mesh, 'POST', '/v1/auth/reauth', { token, body: { purpose } });
    expect(r.status).toBe(200);
    const set = await api(mesh, 'POST', '/v1/auth/set-password', {
      token,
      body,
      confirm: r.body['token'] as string,
    });
    expect(set.status).toBe(200);
    const login = await api(mesh, 'POST', '/v1/auth/token', { body: { email, password: body.password } });
    expect(login.status).toBe(200);
    // With a password now, re-auth asks for it.
    const again = await api(mesh, 'POST', '/v1/auth/reauth', { token, body: { purpose } });
    expect(again.status).toBe(400);
    expect(again.body).toMatchObject({ field: 'password' });
  });

  it('agent key rotation, password change and MFA removal: 401 without a step-up, nothing changed', async () => {
    const u = await quickUser(mesh);
    const agent = await api(mesh, 'POST', '/v1/agents', { token: u.token, body: { name: 'rot' } });
    expect(agent.status).toBe(201);
    const agentId = (agent.body['agent'] as { id: string }).id;
    const agentKey = agent.body['api_key'] as string;
    expectChallenge(
      await api(mesh, 'POST', `/v1/agents/${agentId}/rotate-key`, { token: u.token }),
      'agent.key.rotate',
    );
    const exchange = () => api(mesh, 'POST', '/v1/auth/agent-token', { body: { api_key: agentKey } });
    expect((await exchange()).status).toBe(200);
    const rotated = await api(mesh, 'POST', `/v1/agents/${agentId}/rotate-key`, {
      token: u.token,
      confirm: TEST_PASSWORD,
    });
    expect(rotated.status).toBe(200);
    expect((await exchange()).status).toBe(401);

    expectChallenge(
      await api(mesh, 'POST', '/v1/auth/change-password', {
        token: u.token,
        body: { current_password: TEST_PASSWORD, new_password: 'Another-Horse-7-staple' },
      }),
      'account.password.change',
    );
    expect(
      (await api(mesh, 'POST', '/v1/auth/token', { body: { email: u.email, password: TEST_PASSWORD } }))
        .status,
    ).toBe(200);
    expectChallenge(
      await api(mesh, 'POST', '/v1/auth/mfa/disable', { token: u.token, body: { code: '123456' } }),
      'security.mfa.disable',
    );
  });

  it('the link in the notice opens a page whose form undoes the change (a GET alone changes nothing)', async () => {
    const u = await quickUser(mesh);
    const to = newEmail();
    const started = await api(mesh, 'POST', '/v1/auth/change-email', {
      token: u.token,
      body: { new_email: to },
      confirm: TEST_PASSWORD,
    });
    expect(started.status).toBe(200);
    const code = /\b(\d{6})\b/.exec((await nextMail(to)).text)![1]!;
    const verified = await api(mesh, 'POST', '/v1/auth/verify-email-change', {
      token: u.token,
      body: { code },
    });
    expect(verified.status).toBe(200);
    const undo = UNDO_TOKEN.exec((await nextMail(u.email)).text)![0];

    const page = await fetch(`${mesh.baseUrl}/undo-email-change?token=${undo}`);
    expect(page.status).toBe(200);
    const form = await page.text();
    expect(form).toContain('<form method="post" action="/undo-email-change">');
    expect(form).toContain(`value="${undo}"`);
    // Showing the page spent nothing: the account still has the new address.
    expect((await api(mesh, 'GET', '/v1/auth/me', { token: u.token })).body['email']).toBe(to);

    const post = (token: string) =>
      fetch(`${mesh.baseUrl}/undo-email-change`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token }).toString(),
      });
    const done = await post(undo);
    expect(done.status).toBe(200);
    expect(await done.text()).toContain('E-mail change undone');
    const back = await api(mesh, 'POST', '/v1/auth/token', {
      body: { email: u.email, password: TEST_PASSWORD },
    });
    expect(back.status).toBe(200);
    const again = await post(undo);
    expect(again.status).toBe(400);
    expect(await again.text()).toContain('That did not work');
  });

  /** Changes the address of the user signed in with `token` to `to`; the undo link mailed to `from`. */
  const change = async (token: string, from: string, to: string) => {
    const started = await api(mesh, 'POST', '/v1/auth/change-email', {
      token,
      body: { new_email: to },
      confirm: TEST_PASSWORD,
    });
    expect(started.status).toBe(200);
    const code = /\b(\d{6})\b/.exec((await nextMail(to)).text)![1]!;
    const verified = await api(mesh, 'POST', '/v1/auth/verify-email-change', { token, body: { code } });
    expect(verified.status).toBe(200);
    return UNDO_TOKEN.exec((await nextMail(from)).text)![0];
  };
  const undo = (token: string) => api(mesh, 'POST', '/v1/auth/undo-email-change', { body: { token } });
  const emailOf = async (userId: string) =>
    (await sqlOn<{ email: string }>(mesh, 'SELECT email FROM identity.users WHERE id = $1', [userId]))[0]!
      .email;

  it('an undo whose address another account took meanwhile is 409 and stays usable', async () => {
    const x = await quickUser(mesh);
    const y = await quickUser(mesh);
    const link = await change(x.token, x.email, newEmail());
    // Y takes X's old address (its own undo link goes to Y's old address).
    await change(y.token, y.email, x.email);
    const taken = await undo(link);
    expect(taken.status).toBe(409);
    expect(taken.body).toMatchObject({ status: 409, field: 'token' });
    // Y moves on: the same link now restores X's address.
    await change(y.token, x.email, newEmail());
    expect((await undo(link)).status).toBe(200);
    expect(await emailOf(x.userId)).toBe(x.email);
  });

  it('after two changes (A→B, B→C), the first undo link wins in either order: the later link cannot take the account back', async () => {
    for (const order of ['first link first', 'later link first', 'both at once'] as const) {
      const u = await quickUser(mesh);
      const a = u.email;
      const b = newEmail();
      const c = newEmail();
      const u1 = await change(u.token, a, b);
      const u2 = await change(u.token, b, c);
      if (order === 'first link first') {
        expect((await undo(u1)).status).toBe(200);
        // The link mailed to B (whoever made the changes) died with the undo.
        expect((await undo(u2)).status).toBe(400);
      } else if (order === 'both at once') {
        // Racing undos neither deadlock nor fail: the owner's link wins whatever the timing.
        const [first, later] = await Promise.all([undo(u1), undo(u2)]);
        expect(first.status).toBe(200);
        expect([200, 400]).toContain(later.status);
      } else {
        // Whoever holds B undoes first: the owner's earlier link still restores A.
        expect((await undo(u2)).status).toBe(200);
        expect(await emailOf(u.userId)).toBe(b);
        expect((await undo(u1)).status).toBe(200);
      }
      expect({ order, email: await emailOf(u.userId) }).toEqual({ order, email: a });
    }
  });

  it('agent guardrail edits: 401 without a step-up and nothing changed; other fields need none', async () => {
    const u = await quickUser(mesh);
    const created = await api(mesh, 'POST', '/v1/agents', {
      token: u.token,
      body: { name: 'guarded', tx_max_value_eth: '1' },
    });
    expect(created.status).toBe(201);
    const id = (created.body['agent'] as { id: string }).id;
    const purpose = 'agent.guardrails.edit';
    const patch = (body: Record<string, unknown>, confirm?: string) =>
      api(mesh, 'PATCH', `/v1/agents/${id}`, { token: u.token, body, ...(confirm ? { confirm } : {}) });
    const limit = async () =>
      (await api(mesh, 'GET', `/v1/agents/${id}`, { token: u.token })).body['tx_max_value_eth'];
    expectChallenge(await patch({ tx_max_value_eth: null }), purpose);
    expectRefused(await patch({ tx_max_value_eth: '100' }, `${TEST_PASSWORD}x`), purpose);
    expectRefused(await patch({ per_chain_guardrails: {} }, await rat(u.token, 'agent.key.rotate')), purpose);
    expect(await limit()).toBe('1');
    // A name is no guardrail.
    expect((await patch({ name: 'renamed' })).status).toBe(200);
    const raised = await patch({ tx_max_value_eth: '100' }, await rat(u.token, purpose));
    expect(raised.status).toBe(200);
    expect(await limit()).toBe('100');
  });

  it('opening a signing path or dropping a TEE requirement is a guardrail edit: 401/403 and unchanged', async () => {
    const u = await quickUser(mesh);
    const created = await api(mesh, 'POST', '/v1/agents', {
      token: u.token,
      body: { name: 'paths', intents_require_tee: true, execution_require_tee: true },
    });
    expect(created.status).toBe(201);
    const id = (created.body['agent'] as { id: string }).id;
    const purpose = 'agent.guardrails.edit';
    const patch = (body: Record<string, unknown>, confirm?: string) =>
      api(mesh, 'PATCH', `/v1/agents/${id}`, { token: u.token, body, ...(confirm ? { confirm } : {}) });
    const fields = async () => {
      const a = (await api(mesh, 'GET', `/v1/agents/${id}`, { token: u.token })).body;
      return [
        a['intents_api_enabled'],
        a['message_signing_enabled'],
        a['raw_signing_enabled'],
        a['execution_intents_enabled'],
        a['intents_require_tee'],
        a['execution_require_tee'],
      ];
    };
    const before = await fields();
    expect(before.slice(1)).toEqual([false, false, false, true, true]);
    const widening: Array<Record<string, unknown>> = [
      { raw_signing_enabled: true },
      { message_signing_enabled: true },
      { execution_intents_enabled: true },
      { intents_api_enabled: !before[0] },
      { intents_require_tee: false },
      { execution_require_tee: false },
    ];
    for (const body of widening) {
      expectChallenge(await patch(body), purpose);
      expectRefused(await patch(body, `${TEST_PASSWORD}x`), purpose);
    }
    expectRefused(
      await patch({ raw_signing_enabled: true }, await rat(u.token, 'agent.key.rotate')),
      purpose,
    );
    expect(await fields()).toEqual(before);
    const opened = await patch(
      { raw_signing_enabled: true, intents_require_tee: false },
      await rat(u.token, purpose),
    );
    expect(opened.status).toBe(200);
    expect(opened.body).toMatchObject({ raw_signing_enabled: true, intents_require_tee: false });
  });

  it('router key creation: 401 without a step-up, 403 for a wrong one, nothing issued; a rat_ issues one', async () => {
    const u = await quickUser(mesh);
    const created = await api(mesh, 'POST', '/v1/agents', {
      token: u.token,
      body: { name: 'routed', proxy_enabled: true },
    });
    expect(created.status).toBe(201);
    const id = (created.body['agent'] as { id: string }).id;
    const purpose = 'agent.router_key.create';
    const create = (confirm?: string) =>
      api(mesh, 'POST', `/v1/agents/${id}/router-keys`, {
        token: u.token,
        body: {},
        ...(confirm ? { confirm } : {}),
      });
    const keys = async () =>
      (await api(mesh, 'GET', `/v1/agents/${id}/router-keys`, { token: u.token })).body['router_keys'];
    const refusedBefore = await refusalsOf(u.userId, purpose);
    expectChallenge(await create(), purpose);
    expectRefused(await create(`${TEST_PASSWORD}x`), purpose);
    expectRefused(await create(await rat(u.token, 'agent.key.rotate')), purpose);
    expect(await keys()).toEqual([]);
    // The wrong password is audited (auth.reauth_failed, with the purpose).
    expect(await refusalsOf(u.userId, purpose)).toBeGreaterThanOrEqual(refusedBefore + 1);
    const ok = await create(await rat(u.token, purpose));
    expect(ok.status).toBe(201);
    expect(String(ok.body['router_key'])).toMatch(/^sk-proxy-v1-/);
    expect(await keys()).toHaveLength(1);
  });
});
