import { randomBytes } from 'node:crypto';
import { api, expectProblem, quickUser } from '../src/api';
import { sqlOn } from '../src/db';
import { type Mesh, sharedMesh } from '../src/mesh';

type Answer = { status: number; body: Record<string, unknown>; headers: Headers };

// Issue 16: wrong-secret key exchanges from many client addresses. Each is refused, but past
// EXCHANGE_WRONG_SECRETS_PER_KEY_PER_MINUTE (default 20) per key in a minute they answer 429 under
// one `auth.exchange_refusals_limited` record instead of one audit record each; the key's right
// secret keeps working. The shared mesh trusts X-Forwarded-For from loopback.
describe('wrong-secret key exchanges: a bounded number of audit records per key', () => {
  let mesh: Mesh;
  const PER_MINUTE = 20;

  beforeAll(async () => {
    mesh = await sharedMesh();
  });
  afterAll(() => mesh?.stop());

  async function exchange(apiKey: string, ip: string): Promise<Answer> {
    const res = await fetch(`${mesh.baseUrl}/v1/auth/agent-token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': ip },
      body: JSON.stringify({ api_key: apiKey }),
    });
    const text = await res.text();
    return {
      status: res.status,
      body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
      headers: res.headers,
    };
  }

  /** identity's audit records about an agent, oldest first (its outbox: written with the refusal). */
  const records = (agentId: string) =>
    sqlOn<{ action: string; metadata: Record<string, unknown> }>(
      mesh,
      `SELECT payload->>'action' AS action, payload->'metadata' AS metadata FROM identity.outbox
        WHERE name = 'audit.recorded' AND payload->>'resource_id' = $1 ORDER BY seq`,
      [agentId],
    );

  it('audits 20 wrong secrets from 20 addresses, then answers 429 with one limited record; the right key still works', async () => {
    const owner = await quickUser(mesh);
    const created = await api(mesh, 'POST', '/v1/agents', {
      token: owner.token,
      body: { name: `flood-${randomBytes(3).toString('hex')}` },
    });
    expect(created.status).toBe(201);
    const agentId = (created.body['agent'] as { id: string }).id;
    const apiKey = created.body['api_key'] as string;
    const wrong = `${apiKey.slice(0, -4)}${apiKey.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`;
    const ip = (i: number) => `203.0.113.${i + 1}`;

    const first: Answer[] = [];
    for (let i = 0; i < PER_MINUTE; i++) first.push(await exchange(wrong, ip(i)));
    for (const a of first) expectProblem(a, 401);
    const beyond = await Promise.all(
      Array.from({ length: 15 }, (_, i) => exchange(wrong, ip(PER_MINUTE + i))),
    );
    for (const a of beyond) {
      expectProblem(a, 429);
      expect(Number(a.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(Number(a.headers.get('retry-after'))).toBeLessThanOrEqual(60);
      expect(JSON.stringify(a.body)).not.toContain(wrong);
    }

    const audited = await records(agentId);
    const failed = audited.filter((r) => r.action === 'auth.login_failed');
    expect(failed).toHaveLength(PER_MINUTE);
    expect(failed.every((r) => r.metadata['reason'] === 'wrong_secret')).toBe(true);
    const limited = audited.filter((r) => r.action === 'auth.exchange_refusals_limited');
    expect(limited).toEqual([
      {
        action: 'auth.exchange_refusals_limited',
        metadata: expect.objectContaining({ per_minute: PER_MINUTE }),
      },
    ]);
    // No record holds the secret that was sent.
    expect(JSON.stringify(audited)).not.toContain(wrong.slice(-20));

    // The holder of the right key is not locked out by the flood, from any address.
    const right = await exchange(apiKey, ip(99));
    expect(right.status).toBe(200);
    expect(right.body['access_token']).toEqual(expect.any(String));
  });
});
