import { randomBytes } from 'node:crypto';
import { Metadata } from '@grpc/grpc-js';
import { AgentKeyVaultServiceClient } from '@custos/proto/custos/vault_crypto/v1/agent_keys';
import { callUnary } from '@custos/service-kit';
import { waitFor } from '@custos/service-kit/testing';
import { TEST_PASSWORD, api, quickUser } from './api';
import { sqlOn } from './db';
import type { Mesh } from './mesh';
import { grpcClientAs } from './mesh-grpc';

// Helpers of the non-EVM chain specs (issue 18): a chain of the registry pointed at a local
// responder, an agent with its key on it, submissions, and the canary scan's corpus.

type Body = Record<string, unknown>;

/** A platform admin of the shared meshes (PLATFORM_ADMIN_EMAILS names it); signed up once, then signed in. */
const ADMIN_EMAIL = 'ops@example.org';

/** A platform admin's access token. */
export async function platformAdmin(mesh: Mesh): Promise<string> {
  let r = await api(mesh, 'POST', '/v1/auth/signup', {
    body: { email: ADMIN_EMAIL, password: TEST_PASSWORD },
  });
  if (r.status !== 201) {
    r = await api(mesh, 'POST', '/v1/auth/token', { body: { email: ADMIN_EMAIL, password: TEST_PASSWORD } });
  }
  const token = r.body['access_token'];
  if (typeof token !== 'string') throw new Error(`admin sign-in: ${r.status} ${JSON.stringify(r.body)}`);
  return token;
}

/**
 * Registers a chain of `family` whose node is `rpcUrl` (a responder), named
 * `<family>-<network>-<random>` so that signer's network rule (docs/chains.md) puts it on `network`.
 * Returns its name.
 */
export async function registerChain(
  mesh: Mesh,
  o: {
    family: 'bitcoin' | 'solana' | 'xrp' | 'tron' | 'cardano';
    network: string;
    rpcUrl: string;
    isTestnet?: boolean;
  },
): Promise<string> {
  const admin = await platformAdmin(mesh);
  const name = `${o.family}-${o.network}-${randomBytes(3).toString('hex')}`;
  const r = await api(mesh, 'POST', '/v1/admin/chains', {
    token: admin,
    body: {
      name,
      display_name: name,
      family: o.family,
      chain_id: 5_000_000 + Math.floor(Math.random() * 1_000_000_000),
      rpc_url: o.rpcUrl,
      is_testnet: o.isTestnet ?? o.network !== 'mainnet',
    },
  });
  if (r.status !== 201) throw new Error(`registering ${name}: ${r.status} ${JSON.stringify(r.body)}`);
  return name;
}

/** An org owner, an agent of the org with the Intents API on, its key on `chain`, and its token. */
export interface ChainAgent {
  owner: Awaited<ReturnType<typeof quickUser>>;
  id: string;
  token: string;
  /** The key as `POST /v1/agents/{id}/signing-keys` answered (address: the family's mainnet form). */
  key: Body;
  /** Every API answer of the set-up, for the canary scan. */
  seen: string[];
}

/** Makes an agent (settings merged over `intents_api_enabled: true`) with a key on `chain`. */
export async function chainAgent(mesh: Mesh, chain: string, settings: Body = {}): Promise<ChainAgent> {
  const owner = await quickUser(mesh);
  const seen: string[] = [];
  const created = await api(mesh, 'POST', '/v1/agents', {
    token: owner.token,
    body: { name: `chain-bot-${randomBytes(3).toString('hex')}`, intents_api_enabled: true, ...settings },
  });
  if (created.status !== 201) throw new Error(`agent: ${created.status} ${JSON.stringify(created.body)}`);
  const id = (created.body['agent'] as { id: string }).id;
  const key = await api(mesh, 'POST', `/v1/agents/${id}/signing-keys`, {
    token: owner.token,
    body: { chain },
  });
  if (key.status !== 201) throw new Error(`signing key: ${key.status} ${JSON.stringify(key.body)}`);
  const t = await api(mesh, 'POST', '/v1/auth/agent-token', {
    body: { agent_id: id, api_key: created.body['api_key'] },
  });
  if (t.status !== 200) throw new Error(`agent token: ${t.status} ${JSON.stringify(t.body)}`);
  seen.push(JSON.stringify(created.body), JSON.stringify(key.body), JSON.stringify(t.body));
  return { owner, id, token: t.body['access_token'] as string, key: key.body, seen };
}

/** An HTTP answer: status, parsed body, raw text. */
export interface Reply {
  status: number;
  body: Body;
  text: string;
}

async function post(
  mesh: Mesh,
  path: string,
  token: string,
  body: unknown,
  idempotencyKey?: string,
): Promise<Reply> {
  const res = await fetch(`${mesh.baseUrl}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${token}`,
      ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
    },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text) as Body, text };
}

/** `POST /v1/agents/{id}/transactions` as the agent, with an optional Idempotency-Key. */
export function submitTransaction(
  mesh: Mesh,
  agent: { id: string; token: string },
  body: Body,
  idempotencyKey?: string,
): Promise<Reply> {
  return post(mesh, `/v1/agents/${agent.id}/transactions`, agent.token, body, idempotencyKey);
}

/** `POST /v1/agents/{id}/sign` with `intent_type: transaction` as the agent. */
export function signOnly(mesh: Mesh, agent: { id: string; token: string }, body: Body): Promise<Reply> {
  return post(mesh, `/v1/agents/${agent.id}/sign`, agent.token, { intent_type: 'transaction', ...body });
}

/** `GET …/transactions/{txId}` (with signed_tx) as the agent. */
export async function getTransaction(
  mesh: Mesh,
  agent: { id: string; token: string },
  txId: string,
): Promise<Reply> {
  const r = await api(mesh, 'GET', `/v1/agents/${agent.id}/transactions/${txId}?include_signed_tx=true`, {
    token: agent.token,
  });
  return { status: r.status, body: r.body, text: JSON.stringify(r.body) };
}

/**
 * Waits until the transaction's status is one of `statuses` (the watcher runs every
 * TX_WATCH_INTERVAL_MS; call `step` between looks, e.g. to make the responder produce a block).
 */
export async function waitForStatus(
  mesh: Mesh,
  agent: { id: string; token: string },
  txId: string,
  statuses: string[],
  step: () => void | Promise<void> = () => undefined,
  timeoutMs = 60_000,
): Promise<Body> {
  let last: Body = {};
  try {
    await waitFor(
      async () => {
        await step();
        last = (await getTransaction(mesh, agent, txId)).body;
        return statuses.includes(String(last['status']));
      },
      timeoutMs,
      250,
    );
  } catch (err) {
    throw new Error(
      `transaction ${txId} never reached ${statuses.join('/')}: it is ${JSON.stringify(last)}`,
      {
        cause: err,
      },
    );
  }
  return last;
}

/** The agent's active private key as raw bytes, opened with signer's certificate as signer does. */
export async function privateKeyOf(mesh: Mesh, agentId: string): Promise<Buffer> {
  const [k] = await sqlOn<{ id: string; vault_secret_id: string; org_id: string }>(
    mesh,
    `SELECT id, vault_secret_id, org_id FROM signer.signing_keys WHERE agent_id = $1 AND is_active`,
    [agentId],
  );
  if (!k) throw new Error(`agent ${agentId} has no active key`);
  const s = grpcClientAs(mesh, 'signer', AgentKeyVaultServiceClient, 'vault-crypto');
  try {
    const r = await callUnary(
      s.client,
      s.client.loadAgentKey,
      { orgId: k.org_id, secretId: k.vault_secret_id, keyId: k.id, purpose: 'sign' },
      new Metadata(),
    );
    return Buffer.from(r.privateKey);
  } finally {
    s.close();
  }
}

/**
 * Everything a canary scan reads besides the spec's own answers: the org's audit records (as its
 * owner reads them), signer's outbox (events) and every service's log lines, lower-cased.
 */
export async function scanCorpus(mesh: Mesh, ownerToken: string, seen: string[]): Promise<string> {
  const audit = await api(mesh, 'GET', '/v1/audit/events?limit=1000', { token: ownerToken });
  // A failed read would make the scan pass vacuously.
  if (audit.status !== 200) throw new Error(`audit read for the canary scan: ${audit.status}`);
  const outbox = await sqlOn<{ payload: unknown }>(mesh, 'SELECT payload FROM signer.outbox');
  const logs = [...mesh.output.values()].flat();
  return [...seen, JSON.stringify(audit.body), ...logs, ...outbox.map((o) => JSON.stringify(o.payload))]
    .join('\n')
    .toLowerCase();
}

/** The rows of an agent's transactions (to check that a refusal recorded nothing). */
export async function transactionCount(mesh: Mesh, agentId: string): Promise<number> {
  const [r] = await sqlOn<{ n: string }>(
    mesh,
    'SELECT count(*) AS n FROM signer.transactions WHERE agent_id = $1',
    [agentId],
  );
  return Number(r?.n ?? 0);
}
