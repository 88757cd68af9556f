import type { Mesh } from './mesh';

/** JSON request to the mesh's gateway: returns status, parsed body and headers. */
export async function api(
  mesh: Mesh,
  method: string,
  path: string,
  opts: { body?: unknown; token?: string; raw?: string; confirm?: string } = {},
) {
  const res = await fetch(`${mesh.baseUrl}${path}`, {
    method,
    headers: {
      ...(opts.body !== undefined || opts.raw !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
      // The step-up credential of a sensitive route (SPEC.md §5.9).
      ...(opts.confirm !== undefined ? { 'x-auth-confirm': opts.confirm } : {}),
    },
    ...(opts.raw !== undefined
      ? { body: opts.raw }
      : opts.body !== undefined
        ? { body: JSON.stringify(opts.body) }
        : {}),
  });
  const text = await res.text();
  let body: Record<string, unknown> = {};
  try {
    body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    body = { text };
  }
  return { status: res.status, body, headers: res.headers };
}

/** The claims of a JWT, unverified (for assertions only). */
export function decodePayload(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
}

/** A password that satisfies the policy. */
export const TEST_PASSWORD = 'Correct-Horse-9-battery';

/**
 * Signs up a new user and returns the tokens, the user id and the org id. On a mesh that requires
 * e-mail verification (the `strict` shared mesh), it verifies through the link in the e-mail.
 */
export async function quickUser(
  mesh: Mesh,
): Promise<{ email: string; token: string; userId: string; orgId: string }> {
  const email = `u-${Math.random().toString(36).slice(2, 10)}@example.com`;
  const r = await api(mesh, 'POST', '/v1/auth/signup', { body: { email, password: TEST_PASSWORD } });
  let token = r.body['access_token'];
  if (r.status === 201 && token === undefined && mesh.mail) {
    const mail = await mesh.mail.waitForMessage((m) => m.to === email, 10000);
    const link = /token=([A-Za-z0-9_%]+)/.exec(mail.text)?.[1] ?? '';
    const verified = await api(mesh, 'POST', '/v1/auth/verify-email', {
      body: { token: decodeURIComponent(link) },
    });
    token = verified.body['access_token'];
  }
  if (r.status !== 201 || typeof token !== 'string') {
    throw new Error(`signup failed: ${r.status} ${JSON.stringify(r.body)}`);
  }
  const claims = decodePayload(token);
  return { email, token, userId: String(claims['sub']).slice('user:'.length), orgId: String(claims['org']) };
}

/** A problem-details refusal with this status (and these members). */
export function expectProblem(
  r: Awaited<ReturnType<typeof api>>,
  status: number,
  members: Record<string, unknown> = {},
): void {
  // jest's diff prints a matched `expect.any` as the matcher, hiding the detail that says why.
  if (r.status !== status)
    throw new Error(`expected a ${status} problem, got ${r.status}: ${JSON.stringify(r.body)}`);
  expect({ status: r.status, body: r.body }).toMatchObject({
    status,
    body: { status, title: expect.any(String), detail: expect.any(String), ...members },
  });
  expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
}

/** How many answers had each status, so an assertion over a burst names any unexpected one. */
export function countStatuses(answers: readonly { status: number }[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const a of answers) counts[a.status] = (counts[a.status] ?? 0) + 1;
  return counts;
}
