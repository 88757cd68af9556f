import { randomBytes } from 'node:crypto';
import type { SmtpCapture } from '@custos/testing';
import { TEST_PASSWORD, api, expectProblem, quickUser } from '../src/api';
import { sqlOn } from '../src/db';
import { sharedMail, sharedMesh, type Mesh } from '../src/mesh';

const NEW_PASSWORD = 'Another-Horse-7-battery';

describe('identity contracts: mail that survives copy-paste, the pages at its links, typed agents', () => {
  let mesh: Mesh;
  let smtp: SmtpCapture;

  beforeAll(async () => {
    mesh = await sharedMesh('strict');
    smtp = sharedMail();
  });
  afterAll(async () => {
    await mesh?.stop();
    await smtp?.close();
  });

  const newEmail = () => `page-${randomBytes(4).toString('hex')}@example.com`;
  const form = (path: string, fields: Record<string, string>) =>
    fetch(`${mesh.baseUrl}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields).toString(),
    });

  /** The one token of a raw message: every `cse_` match of a grep is the whole of it. */
  function tokenOf(raw: string): string {
    expect(raw).toMatch(/^Content-Transfer-Encoding: 7bit\r?$/m);
    const found = raw.match(/cse_[A-Za-z0-9_-]*/g) ?? [];
    expect(found.length).toBeGreaterThanOrEqual(2); // in the link and on its own line
    expect(new Set(found).size).toBe(1);
    expect(found[0]).toMatch(/^cse_[A-Za-z0-9]{16}_[A-Za-z0-9]{43}$/);
    return found[0]!;
  }

  function expectPage(r: Response) {
    expect(r.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(r.headers.get('cache-control')).toBe('no-store');
    expect(r.headers.get('content-security-policy')).toMatch(/default-src 'none'/);
  }

  it('verifies an address through the page the e-mail links to', async () => {
    const email = newEmail();
    expect(
      (await api(mesh, 'POST', '/v1/auth/signup', { body: { email, password: TEST_PASSWORD } })).status,
    ).toBe(201);
    const mail = await smtp.waitForMessage((m) => m.to === email, 10000);
    const token = tokenOf(mail.raw);
    const link = new URL(`https://custos.test/verify-email?token=${token}`);
    expect(mail.raw).toContain(link.href);

    const page = await fetch(`${mesh.baseUrl}${link.pathname}${link.search}`);
    expect(page.status).toBe(200);
    expectPage(page);
    expect(await page.text()).toContain(`value="${token}"`);
    // Showing the form spends nothing: sign-in still waits for the verification.
    expect(
      (await api(mesh, 'POST', '/v1/auth/token', { body: { email, password: TEST_PASSWORD } })).status,
    ).toBe(403);

    const done = await form('/verify-email', { token });
    expect(done.status).toBe(200);
    expectPage(done);
    expect(await done.text()).toContain('E-mail address verified');
    // The page keeps no tokens, so verifying there starts no session.
    const sessions = await sqlOn<{ n: number }>(
      mesh,
      'SELECT count(*)::int AS n FROM identity.refresh_tokens r JOIN identity.users u ON u.id = r.user_id WHERE u.email = $1',
      [email],
    );
    expect(sessions[0]!.n).toBe(0);
    expect(
      (await api(mesh, 'POST', '/v1/auth/token', { body: { email, password: TEST_PASSWORD } })).status,
    ).toBe(200);
    const again = await form('/verify-email', { token });
    expect(again.status).toBe(400);
    expect(await again.text()).toContain('invalid or expired verification token');
  });

  it('resets a password through the page the e-mail links to', async () => {
    const user = await quickUser(mesh);
    expect(
      (await api(mesh, 'POST', '/v1/auth/forgot-password', { body: { email: user.email } })).status,
    ).toBe(200);
    const mail = await smtp.waitForMessage((m) => m.to === user.email && /reset/i.test(m.subject), 10000);
    const token = tokenOf(mail.raw);
    expect(mail.raw).toContain(`https://custos.test/reset-password?token=${token}`);

    const page = await fetch(`${mesh.baseUrl}/reset-password?token=${token}`);
    expect(page.status).toBe(200);
    expectPage(page);
    expect(await page.text()).toContain('name="new_password"');

    const weak = await form('/reset-password', { token, new_password: 'short' });
    expect(weak.status).toBe(400);
    expect(await weak.text()).toContain(`value="${token}"`);
    const done = await form('/reset-password', { token, new_password: NEW_PASSWORD });
    expect(done.status).toBe(200);
    expect(await done.text()).toContain('Password updated');
    const signIn = (password: string) =>
      api(mesh, 'POST', '/v1/auth/token', { body: { email: user.email, password } });
    expect((await signIn(NEW_PASSWORD)).status).toBe(200);
    expect((await signIn(TEST_PASSWORD)).status).toBe(401);
  });

  it('keeps typed agent settings exactly as sent, clears them with null, and names the field it refuses', async () => {
    const owner = await quickUser(mesh);
    const policy = {
      rules: [
        {
          conditions: [
            { type: 'value_above', threshold_wei: '1000000000000000000' },
            { type: 'chain_in', chains: ['base', 'ethereum'] },
          ],
          risk_tier: 2,
          approval: { min_approvals: 2, required_roles: ['admin'], per_role_minimums: { admin: 1 } },
          expiry_secs: 3600,
        },
        { conditions: [{ type: 'always' }], risk_tier: 1 },
      ],
    };
    const guardrails = {
      base: { max_value: '0.25', daily_limit: '1', to_allowlist: ['0xabc'], gas_daily_budget_native: '0.01' },
      ethereum: { gas_daily_budget_native: '0.5' },
    };
    const created = await api(mesh, 'POST', '/v1/agents', {
      token: owner.token,
      body: {
        name: 'typed',
        action_approval_policy: policy,
        per_chain_guardrails: guardrails,
        tx_max_value_eth: 0.5,
        max_gas_limit: 3_000_000,
        proxy_config: { nested: { deep: [1, 'two', null] } },
      },
    });
    expect(created.status).toBe(201);
    const id = String((created.body['agent'] as Record<string, unknown>)['id']);
    const read = await api(mesh, 'GET', `/v1/agents/${id}`, { token: owner.token });
    expect(read.body).toMatchObject({
      action_approval_policy: policy,
      per_chain_guardrails: guardrails,
      tx_max_value_eth: '0.5',
      max_gas_limit: 3_000_000,
      proxy_config: { nested: { deep: [1, 'two', null] } },
    });
    expect(read.body['action_approval_policy']).toEqual(policy);

    const cleared = await api(mesh, 'PATCH', `/v1/agents/${id}`, {
      confirm: TEST_PASSWORD,
      token: owner.token,
      body: { action_approval_policy: null, tx_max_value_eth: null, description: null },
    });
    expect(cleared.status).toBe(200);
    expect(cleared.body).toMatchObject({
      action_approval_policy: null,
      tx_max_value_eth: null,
      description: '',
      per_chain_guardrails: guardrails,
    });

    const refused: Array<[Record<string, unknown>, string]> = [
      [{ per_chain_guardrails: { base: { colour: 'blue' } } }, 'per_chain_guardrails.base.colour'],
      [{ per_chain_guardrails: { base: { max_value: '-1' } } }, 'per_chain_guardrails.base.max_value'],
      [
        { action_approval_policy: { rules: [{ conditions: [], risk_tier: 1 }] } },
        'action_approval_policy.rules[0].conditions',
      ],
      [
        { action_approval_policy: { rules: [{ conditions: [{ type: 'always' }], risk_tier: 9 }] } },
        'action_approval_policy.rules[0].risk_tier',
      ],
      [{ execution_guardrails: { enforcement: 'log', extra: 1 } }, 'execution_guardrails.extra'],
      [{ environment: null }, 'environment'],
    ];
    for (const [body, field] of refused) {
      const r = await api(mesh, 'PATCH', `/v1/agents/${id}`, {
        confirm: TEST_PASSWORD,
        token: owner.token,
        body,
      });
      expectProblem(r, 400, { field });
      expect(String(r.body['detail'])).toContain(field);
    }
  });

  it('documents the agent shapes in the OpenAPI document', async () => {
    const doc = await api(mesh, 'GET', '/v1/openapi.json');
    const paths = doc.body['paths'] as Record<string, Record<string, Record<string, unknown>>>;
    const post = paths['/v1/agents']!['post']!;
    const schema = JSON.stringify(post['requestBody']);
    for (const name of ['action_approval_policy', 'per_chain_guardrails', 'usdc_daily_limit_usd']) {
      expect(schema).toContain(name);
    }
    expect(JSON.stringify(post['responses'])).toContain('api_key');
    expect(paths['/v1/auth/agent-token']!['post']).toBeDefined();
    expect(Object.keys(paths)).not.toContain('/verify-email');
  });
});
