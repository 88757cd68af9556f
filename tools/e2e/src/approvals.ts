import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { JsonRpcProvider, getAddress } from 'ethers';
import { waitFor } from '@custos/service-kit/testing';
import { TEST_PASSWORD, api, type quickUser } from './api';
import type { Mesh } from './mesh';
import { currentStep, totp } from './totp';

// Helpers of the approval specs (issue 19): agents on the mesh's anvil with an
// action_approval_policy, the approvals API as a human or an agent, TOTP approvers, audit records
// and a webhook receiver.

type User = Awaited<ReturnType<typeof quickUser>>;
type Body = Record<string, unknown>;
export type Answer = Awaited<ReturnType<typeof api>>;

/** An agent with its EVM key on anvil and its token. */
export interface AnvilAgent {
  id: string;
  token: string;
  address: string;
}

export const ETH = 10n ** 18n;

/** A checksummed random EVM address (nobody holds its key). */
export const randomAddress = (): string => getAddress(`0x${randomBytes(20).toString('hex')}`);

/** A JSON-RPC client of the mesh's anvil. */
export function anvilOf(mesh: Mesh): JsonRpcProvider {
  return new JsonRpcProvider(mesh.env['LOCAL_EVM_RPC_URL'], 31337, { staticNetwork: true });
}

/** Makes an agent of `user`'s org (settings over `intents_api_enabled: true`) with a key on anvil. */
export async function anvilAgent(mesh: Mesh, user: User, settings: Body = {}): Promise<AnvilAgent> {
  const created = await api(mesh, 'POST', '/v1/agents', {
    token: user.token,
    body: { name: `ap-bot-${randomBytes(3).toString('hex')}`, intents_api_enabled: true, ...settings },
  });
  if (created.status !== 201) throw new Error(`agent: ${created.status} ${JSON.stringify(created.body)}`);
  const id = (created.body['agent'] as { id: string }).id;
  const key = await api(mesh, 'POST', `/v1/agents/${id}/signing-keys`, {
    token: user.token,
    body: { chain: 'anvil' },
  });
  if (key.status !== 201) throw new Error(`signing key: ${key.status} ${JSON.stringify(key.body)}`);
  const t = await api(mesh, 'POST', '/v1/auth/agent-token', {
    body: { agent_id: id, api_key: created.body['api_key'] },
  });
  if (t.status !== 200) throw new Error(`agent token: ${t.status} ${JSON.stringify(t.body)}`);
  return { id, token: t.body['access_token'] as string, address: key.body['address'] as string };
}

/** An HTTP answer with the raw text too. */
export interface Reply {
  status: number;
  body: Body;
  headers: Headers;
  text: string;
}

/** A JSON POST with optional bearer, X-Auth-Confirm and Idempotency-Key headers. */
export async function postJson(
  mesh: Mesh,
  path: string,
  body: unknown,
  o: { token?: string; confirm?: string; idempotencyKey?: string } = {},
): Promise<Reply> {
  const res = await fetch(`${mesh.baseUrl}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(o.token ? { authorization: `Bearer ${o.token}` } : {}),
      ...(o.confirm !== undefined ? { 'x-auth-confirm': o.confirm } : {}),
      ...(o.idempotencyKey ? { 'idempotency-key': o.idempotencyKey } : {}),
    },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: Body = {};
  try {
    parsed = text ? (JSON.parse(text) as Body) : {};
  } catch {
    parsed = { text };
  }
  return { status: res.status, body: parsed, headers: res.headers, text };
}

/** `POST /v1/agents/{id}/transactions` as the agent. */
export function submitTx(
  mesh: Mesh,
  agent: { id: string; token: string },
  body: Body,
  idempotencyKey?: string,
): Promise<Reply> {
  return postJson(mesh, `/v1/agents/${agent.id}/transactions`, body, {
    token: agent.token,
    ...(idempotencyKey ? { idempotencyKey } : {}),
  });
}

/** `GET /v1/approvals/{id}` with `token`. */
export function getApproval(mesh: Mesh, token: string, id: string): Promise<Answer> {
  return api(mesh, 'GET', `/v1/approvals/${id}`, { token });
}

/** `POST /v1/approvals/{id}/decide` as a human, with an optional X-Auth-Confirm credential. */
export function decide(
  mesh: Mesh,
  token: string,
  id: string,
  decision: string,
  confirm?: string,
  reason?: string,
): Promise<Answer> {
  return api(mesh, 'POST', `/v1/approvals/${id}/decide`, {
    token,
    body: { decision, ...(reason ? { reason } : {}) },
    ...(confirm !== undefined ? { confirm } : {}),
  });
}

/** `POST /v1/pending-approvals/{id}/execute` as a human. */
export function execute(mesh: Mesh, token: string, id: string): Promise<Answer> {
  return api(mesh, 'POST', `/v1/pending-approvals/${id}/execute`, { token, body: {} });
}

/** A rat_ token of `user` for `purpose` (password re-authentication). */
export async function reauthToken(mesh: Mesh, token: string, purpose: string): Promise<string> {
  const r = await api(mesh, 'POST', '/v1/auth/reauth', { token, body: { purpose, password: TEST_PASSWORD } });
  if (r.status !== 200) throw new Error(`reauth ${purpose}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body['token'] as string;
}

/** A human with TOTP enrolled; `code()` gives a code the server has not accepted yet. */
export interface TotpUser {
  secret: string;
  code(): Promise<string>;
}

/** Enrols TOTP for `user` (a session token stays valid) and returns a source of fresh codes. */
export async function enrolTotp(mesh: Mesh, user: { token: string }): Promise<TotpUser> {
  const setup = await api(mesh, 'POST', '/v1/auth/mfa/setup', { token: user.token, confirm: TEST_PASSWORD });
  if (setup.status !== 200) throw new Error(`mfa setup: ${setup.status} ${JSON.stringify(setup.body)}`);
  const secret = setup.body['secret'] as string;
  let lastStep = currentStep();
  const verified = await api(mesh, 'POST', '/v1/auth/mfa/verify-setup', {
    token: user.token,
    body: { code: totp(secret, lastStep) },
  });
  if (verified.status !== 200)
    throw new Error(`mfa verify: ${verified.status} ${JSON.stringify(verified.body)}`);
  return {
    secret,
    // Each code once: the next step inside the ±1 window, or wait for the clock.
    async code() {
      const step = Math.max(lastStep + 1, currentStep());
      while (currentStep() + 1 < step) await new Promise((r) => setTimeout(r, 500));
      lastStep = step;
      return totp(secret, step);
    },
  };
}

/** The org's audit records of `action` (as `token` reads them) that satisfy `pick`, waiting for at least one. */
export async function auditRecords(
  mesh: Mesh,
  token: string,
  action: string,
  pick: (e: Body) => boolean = () => true,
  timeoutMs = 20_000,
): Promise<Body[]> {
  let last: Body[] = [];
  try {
    await waitFor(
      async () => {
        const r = await api(mesh, 'GET', `/v1/audit/events?limit=1000&action=${action}`, { token });
        last = r.status === 200 ? (r.body['events'] as Body[]).filter(pick) : [];
        return last.length > 0;
      },
      timeoutMs,
      200,
    );
  } catch {
    throw new Error(`no ${action} audit record matched within ${timeoutMs} ms`);
  }
  return last;
}

/**
 * The key's nonce on the chain once nothing of it is in flight (pending and latest agree: anvil's
 * pending count can lag for a moment while it mines).
 */
export function settledNonce(chain: JsonRpcProvider, address: string): Promise<number> {
  return waitFor(
    async () => {
      const [pending, latest] = await Promise.all([
        chain.getTransactionCount(address, 'pending'),
        chain.getTransactionCount(address, 'latest'),
      ]);
      return pending === latest ? latest : undefined;
    },
    10_000,
    50,
  );
}

/** Waits until the agent's transaction is confirmed or failed and returns it. */
export function settledTx(mesh: Mesh, agent: { id: string; token: string }, txId: string): Promise<Body> {
  return waitFor(
    async () => {
      const r = await api(mesh, 'GET', `/v1/agents/${agent.id}/transactions/${txId}`, { token: agent.token });
      const s = r.body['status'];
      return s === 'confirmed' || s === 'failed' ? r.body : undefined;
    },
    30_000,
    100,
  );
}

/** One request a receiver got, body bytes as they arrived. */
export interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
}

/** An HTTP server on `host` that records every request and answers 204 (a webhook receiver). */
export async function webhookReceiver(host: string) {
  const seen: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ path: req.url ?? '', headers: req.headers, raw: Buffer.concat(chunks) });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    seen,
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
