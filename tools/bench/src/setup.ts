import { randomBytes } from 'node:crypto';

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
export async function must(
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
export function value(bytes: number): string {
  return randomBytes(bytes).toString('base64url').slice(0, bytes);
}

/**
 * A user with a token: signs up (the mesh must run with EMAIL_VERIFICATION_REQUIRED=false), which
 * also creates the user's org, or signs in as BENCH_EMAIL / BENCH_PASSWORD when both are set (for a
 * mesh started elsewhere; every "user" is then that one user, in its one org).
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

/** Creates a vault of the user's org and returns its id. */
export async function createVault(baseUrl: string, token: string, name: string): Promise<string> {
  const body = await must(baseUrl, 'create vault', 201, 'POST', '/v1/vaults', {
    token,
    body: { name: `${name}-${randomBytes(4).toString('hex')}`, description: 'tools/bench' },
  });
  return String(body['id']);
}

/** Stores (a new version of) the secret at `path` of a vault, as `token`. */
export async function storeSecret(
  baseUrl: string,
  token: string,
  vaultId: string,
  path: string,
  secret: string,
): Promise<void> {
  await must(baseUrl, 'store secret', 201, 'PUT', `/v1/vaults/${vaultId}/secrets/${path}`, {
    token,
    body: { type: 'api_key', value: secret },
  });
}

/** A registered agent: its id and its `ocv_` API key (shown only at registration). */
export interface BenchAgent {
  id: string;
  apiKey: string;
}

/**
 * Registers an agent in the user's org, with `settings` of the create body (e.g.
 * `{ intents_api_enabled: true }`: its token then carries the Intents flag).
 */
export async function registerAgent(
  baseUrl: string,
  userToken: string,
  settings: Record<string, unknown> = {},
): Promise<BenchAgent> {
  const created = await must(baseUrl, 'register agent', 201, 'POST', '/v1/agents', {
    token: userToken,
    body: { name: `bench-${randomBytes(4).toString('hex')}`, ...settings },
  });
  return {
    id: String((created['agent'] as Record<string, unknown>)['id']),
    apiKey: String(created['api_key']),
  };
}

/** Has signer make an agent's signing key on `chain` (as the org's owner); returns its address. */
export async function createSigningKey(
  baseUrl: string,
  userToken: string,
  agentId: string,
  chain: string,
): Promise<string> {
  const key = await must(baseUrl, 'create signing key', 201, 'POST', `/v1/agents/${agentId}/signing-keys`, {
    token: userToken,
    body: { chain },
  });
  const address = key['address'];
  if (typeof address !== 'string' || !/^0x[0-9a-fA-F]{40}$/.test(address))
    throw new Error('create signing key: no address in the answer');
  return address;
}

/** Grants an agent `permissions` on the secrets of a vault under `pattern`. */
export async function grant(
  baseUrl: string,
  userToken: string,
  vaultId: string,
  agentId: string,
  pattern: string,
  permissions: Array<'read' | 'write'>,
): Promise<void> {
  await must(baseUrl, `grant ${permissions.join('+')}`, 201, 'POST', `/v1/vaults/${vaultId}/policies`, {
    token: userToken,
    body: { secret_path_pattern: pattern, principal_type: 'agent', principal_id: agentId, permissions },
  });
}

/**
 * Exchanges an agent's API key for its token (`POST /v1/auth/agent-token`). The token carries the
 * scopes of the agent's grants at that moment, so exchange after granting.
 */
export async function agentToken(baseUrl: string, agent: BenchAgent): Promise<string> {
  const body = await must(baseUrl, 'agent token', 200, 'POST', '/v1/auth/agent-token', {
    body: { agent_id: agent.id, api_key: agent.apiKey },
  });
  const token = body['access_token'];
  if (typeof token !== 'string' || token === '')
    throw new Error('agent token: no access_token in the answer');
  return token;
}

/** Reads a secret as `token` and throws unless it holds `expected`. */
export async function expectValue(
  baseUrl: string,
  token: string,
  vaultId: string,
  path: string,
  expected: string,
): Promise<void> {
  const read = await must(baseUrl, 'read back', 200, 'GET', `/v1/vaults/${vaultId}/secrets/${path}`, {
    token,
  });
  if (read['value'] !== expected) throw new Error(`read back of ${path} returned another value`);
}

/** Runs `task` for every item, at most `parallel` at a time (set-up calls, not timed). */
export async function eachLimited<T>(items: T[], parallel: number, task: (item: T) => Promise<void>) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await task(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(parallel, items.length) }, worker));
}

/** A JSON-RPC call to a chain node (anvil); throws with the method's name on an error answer. */
export async function jsonRpc<T = unknown>(url: string, method: string, params: unknown[]): Promise<T> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const text = await res.text();
  let body: { result?: T; error?: { message?: string } } = {};
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    // reported below
  }
  if (!res.ok || body.error || body.result === undefined) {
    throw new Error(`${method}: ${res.status} ${body.error?.message ?? text.slice(0, 200)}`);
  }
  return body.result;
}

/** Sets an address's balance on anvil (`anvil_setBalance`), in wei. */
export async function fund(anvilUrl: string, address: string, wei: bigint): Promise<void> {
  await jsonRpc(anvilUrl, 'anvil_setBalance', [address, `0x${wei.toString(16)}`]);
}

/** An address's transaction count (its next nonce) at `tag` ('latest': mined, 'pending': accepted). */
export async function nonceOf(anvilUrl: string, address: string, tag = 'latest'): Promise<number> {
  return Number(BigInt(await jsonRpc<string>(anvilUrl, 'eth_getTransactionCount', [address, tag])));
}

/**
 * The mined nonces of `addresses` once every accepted transaction is mined, polling until `latest`
 * equals `pending` for all of them (or `timeoutMs` passed) and returning the `latest` counts. While
 * they differ it asks anvil for a block (`evm_mine`): anvil automines a block when a transaction
 * arrives, but one that arrived ahead of its predecessor's nonce waits in the pool, ready, until
 * the next transaction or block comes.
 */
export async function minedNonces(
  anvilUrl: string,
  addresses: string[],
  timeoutMs = 10_000,
): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const latest: number[] = [];
    const pending: number[] = [];
    await eachLimited([...addresses.keys()], 8, async (k) => {
      latest[k] = await nonceOf(anvilUrl, addresses[k]!, 'latest');
      pending[k] = await nonceOf(anvilUrl, addresses[k]!, 'pending');
    });
    if (latest.every((n, k) => n === pending[k]) || Date.now() > deadline) return latest;
    await jsonRpc(anvilUrl, 'evm_mine', []);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Waits until anvil's pool is empty (`txpool_status`), asking for a block (`evm_mine`) each time it
 * is not, for at most `timeoutMs`; returns whether it emptied. Anvil answers
 * `eth_sendRawTransaction` before mining and, flooded, mines behind.
 */
export async function settlePool(anvilUrl: string, timeoutMs = 30_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await jsonRpc<{ pending: string; queued: string }>(anvilUrl, 'txpool_status', []);
    if (BigInt(s.pending) === 0n && BigInt(s.queued) === 0n) return true;
    if (Date.now() > deadline) return false;
    await jsonRpc(anvilUrl, 'evm_mine', []);
    await new Promise((r) => setTimeout(r, 50));
  }
}
