import { randomBytes } from 'node:crypto';
import { type LoadRequest } from './load.js';

/** JSON request to the gateway, for setting a scenario up (not timed). */
export async function api(
  baseUrl: string,
  method: string,
  path: string,
  opts: { body?: unknown; token?: string } = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: {
      ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
    },
    ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
  });
  const text = await res.text();
  let body: Record<string, unknown> = {};
  try {
    body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    body = { text };
  }
  return { status: res.status, body };
}

/** Calls the gateway and throws, naming the step, unless it answers `expected`. */
async function must(
  baseUrl: string,
  step: string,
  expected: number,
  method: string,
  path: string,
  opts: { body?: unknown; token?: string } = {},
): Promise<Record<string, unknown>> {
  const r = await api(baseUrl, method, path, opts);
  if (r.status !== expected) {
    throw new Error(
      `${step}: ${method} ${path} answered ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`,
    );
  }
  return r.body;
}

/** A value of `bytes` printable characters (what a password or API key looks like). */
function value(bytes: number): string {
  return randomBytes(bytes).toString('base64url').slice(0, bytes);
}

/**
 * A user with a token: signs up (the mesh must run with EMAIL_VERIFICATION_REQUIRED=false), or signs
 * in as BENCH_EMAIL / BENCH_PASSWORD when both are set (for a mesh started elsewhere).
 */
export async function benchUser(baseUrl: string): Promise<string> {
  const email = process.env.BENCH_EMAIL;
  const password = process.env.BENCH_PASSWORD;
  if (email && password) {
    const body = await must(baseUrl, 'sign in', 200, 'POST', '/v1/auth/token', { body: { email, password } });
    return String(body['access_token']);
  }
  const body = await must(baseUrl, 'sign up', 201, 'POST', '/v1/auth/signup', {
    body: { email: `bench-${randomBytes(5).toString('hex')}@example.com`, password: `Bench-${value(20)}-9` },
  });
  return String(body['access_token']);
}

/** A set-up scenario: the request of the i-th iteration, and what it is. */
export interface Scenario {
  name: string;
  description: string;
  request(i: number): LoadRequest;
}

async function createVault(baseUrl: string, token: string, name: string): Promise<string> {
  const body = await must(baseUrl, 'create vault', 201, 'POST', '/v1/vaults', {
    token,
    body: { name: `${name}-${randomBytes(4).toString('hex')}`, description: 'tools/bench' },
  });
  return String(body['id']);
}

/**
 * `agent-read`: an agent with a read policy on `bench/*` reads `paths` secrets of `valueBytes` in
 * turn with its own token: gateway → vault-crypto → policy decision → audited read → decrypt.
 */
export async function agentRead(
  baseUrl: string,
  opts: { paths: number; valueBytes: number },
): Promise<Scenario> {
  const userToken = await benchUser(baseUrl);
  const vaultId = await createVault(baseUrl, userToken, 'bench-read');
  const values: string[] = [];
  for (let k = 0; k < opts.paths; k++) {
    values.push(value(opts.valueBytes));
    await must(baseUrl, 'store secret', 201, 'PUT', `/v1/vaults/${vaultId}/secrets/bench/s${k}`, {
      token: userToken,
      body: { type: 'api_key', value: values[k] },
    });
  }
  const created = await must(baseUrl, 'register agent', 201, 'POST', '/v1/agents', {
    token: userToken,
    body: { name: `bench-${randomBytes(3).toString('hex')}` },
  });
  const agentId = String((created['agent'] as Record<string, unknown>)['id']);
  await must(baseUrl, 'grant read', 201, 'POST', `/v1/vaults/${vaultId}/policies`, {
    token: userToken,
    body: {
      secret_path_pattern: 'bench/*',
      principal_type: 'agent',
      principal_id: agentId,
      permissions: ['read'],
    },
  });
  // The token is minted after the grant, so it carries the scopes the grant gives.
  const exchanged = await must(baseUrl, 'agent token', 200, 'POST', '/v1/auth/agent-token', {
    body: { agent_id: agentId, api_key: created['api_key'] },
  });
  const agentToken = String(exchanged['access_token']);
  for (let k = 0; k < opts.paths; k++) {
    const read = await must(baseUrl, 'agent read', 200, 'GET', `/v1/vaults/${vaultId}/secrets/bench/s${k}`, {
      token: agentToken,
    });
    if (read['value'] !== values[k]) throw new Error(`agent read of bench/s${k} returned another value`);
  }
  const headers = { authorization: `Bearer ${agentToken}`, accept: 'application/json' };
  const paths = Array.from({ length: opts.paths }, (_, k) => `/v1/vaults/${vaultId}/secrets/bench/s${k}`);
  return {
    name: 'agent-read',
    description: `agent reads one of ${opts.paths} secrets (${opts.valueBytes} B) under a read policy`,
    request: (i) => ({ method: 'GET', path: paths[i % paths.length]!, headers }),
  };
}

/** `user-write`: the vault's owner stores a new version of one of `paths` secrets of `valueBytes`. */
export async function userWrite(
  baseUrl: string,
  opts: { paths: number; valueBytes: number },
): Promise<Scenario> {
  const userToken = await benchUser(baseUrl);
  const vaultId = await createVault(baseUrl, userToken, 'bench-write');
  const paths = Array.from({ length: opts.paths }, (_, k) => `/v1/vaults/${vaultId}/secrets/bench/w${k}`);
  // Every path exists before the run, so the run stores versions rather than new paths (tier caps).
  for (const p of paths) {
    await must(baseUrl, 'store secret', 201, 'PUT', p, {
      token: userToken,
      body: { type: 'api_key', value: value(opts.valueBytes) },
    });
  }
  const bodies = Array.from({ length: 64 }, () =>
    Buffer.from(JSON.stringify({ type: 'api_key', value: value(opts.valueBytes) })),
  );
  const headers = {
    authorization: `Bearer ${userToken}`,
    accept: 'application/json',
    'content-type': 'application/json',
  };
  return {
    name: 'user-write',
    description: `user stores a new version of one of ${opts.paths} secrets (${opts.valueBytes} B)`,
    request: (i) => ({
      method: 'PUT',
      path: paths[i % paths.length]!,
      headers,
      body: bodies[i % bodies.length]!,
    }),
  };
}
