import { randomBytes, randomUUID } from 'node:crypto';
import { Metadata } from '@grpc/grpc-js';
import { Wallet } from 'ethers';
import { AgentKeyVaultServiceClient } from '@custos/proto/custos/vault_crypto/v1/agent_keys';
import { callUnary } from '@custos/service-kit';
import { waitFor } from '@custos/service-kit/testing';
import { api, quickUser } from '../src/api';
import { sqlOn } from '../src/db';
import { type Mesh, type ServiceName, sharedMesh } from '../src/mesh';
import { grpcClientAs } from '../src/mesh-grpc';

// Issue 17, key custody: vault-crypto's LoadAgentKey (signer's certificate only), export and
// import of agents' signing keys (owners and admins, behind step-up), client_tss keys and the
// client key shares stored as ciphertext, never opened.

type User = Awaited<ReturnType<typeof quickUser>>;
type Body = Record<string, unknown>;

describe('signer: key custody', () => {
  let mesh: Mesh;
  let owner: User;
  let stranger: User;
  // Everything the API answered in this spec, scanned for private keys at the end.
  const seen: string[] = [];

  const call = async (
    method: string,
    path: string,
    opts: { token?: string; body?: unknown; confirm?: string } = {},
  ) => {
    const r = await api(mesh, method, path, opts);
    seen.push(JSON.stringify(r.body));
    return r;
  };

  async function newAgent(user: User): Promise<{ id: string; token: string }> {
    const created = await call('POST', '/v1/agents', {
      token: user.token,
      body: { name: `custody-bot-${randomBytes(3).toString('hex')}` },
    });
    expect(created.status).toBe(201);
    const id = (created.body['agent'] as { id: string }).id;
    const t = await api(mesh, 'POST', '/v1/auth/agent-token', {
      body: { agent_id: id, api_key: created.body['api_key'] },
    });
    expect(t.status).toBe(200);
    return { id, token: t.body['access_token'] as string };
  }

  /** The org's audit records of an action, once at least `n` have arrived. */
  async function auditOf(user: User, action: string, n = 1): Promise<Body[]> {
    return waitFor(
      async () => {
        const a = await call('GET', `/v1/audit/events?limit=100&action=${action}`, { token: user.token });
        const list = (a.body['events'] as Body[] | undefined) ?? [];
        return list.length >= n ? list : undefined;
      },
      30000,
      200,
    ).catch(async (err: Error) => {
      const last = await call('GET', `/v1/audit/events?limit=100&action=${action}`, { token: user.token });
      throw new Error(`${err.message}: ${action}: ${JSON.stringify(last.body)}`);
    });
  }

  /** How many records of an action the org's audit log holds now. */
  async function auditCount(user: User, action: string): Promise<number> {
    const a = await call('GET', `/v1/audit/events?limit=100&action=${action}`, { token: user.token });
    expect(a.status).toBe(200);
    return (a.body['events'] as Body[]).length;
  }

  /** A server key for a new agent of `user`'s org: the listed key with its stored secret's id. */
  async function agentWithKey(
    user: User,
  ): Promise<{ agent: { id: string; token: string }; key: Body; secretId: string }> {
    const agent = await newAgent(user);
    const r = await call('POST', `/v1/agents/${agent.id}/signing-keys`, {
      token: user.token,
      body: { chain: 'anvil' },
    });
    expect(r.status).toBe(201);
    const [row] = await sqlOn<{ vault_secret_id: string }>(
      mesh,
      'SELECT vault_secret_id FROM signer.signing_keys WHERE id = $1',
      [r.body['id']],
    );
    return { agent, key: r.body, secretId: row!.vault_secret_id };
  }

  beforeAll(async () => {
    mesh = await sharedMesh();
    owner = await quickUser(mesh);
    stranger = await quickUser(mesh);
  });
  afterAll(() => mesh?.stop());

  describe("vault-crypto's LoadAgentKey answers signer's certificate only", () => {
    it('refuses every other service, even with a user token; opens the key for signer, audited', async () => {
      const { agent, key, secretId } = await agentWithKey(owner);
      const request = { orgId: owner.orgId, secretId, keyId: key['id'] as string, purpose: 'sign' };
      const md = new Metadata();
      md.set('authorization', `Bearer ${owner.token}`);
      const before = await auditCount(owner, 'secret.agent_key_loaded');
      const others: ServiceName[] = [
        'gateway',
        'identity',
        'webhook-dispatcher',
        'policy',
        'approvals',
        'billing',
        'audit',
        'vault-crypto',
      ];
      for (const as of others) {
        const c = grpcClientAs(mesh, as, AgentKeyVaultServiceClient, 'vault-crypto');
        try {
          await expect(callUnary(c.client, c.client.loadAgentKey, request, md)).rejects.toMatchObject({
            kind: 'permission_denied',
          });
        } finally {
          c.close();
        }
      }
      const s = grpcClientAs(mesh, 'signer', AgentKeyVaultServiceClient, 'vault-crypto');
      try {
        const r = await callUnary(s.client, s.client.loadAgentKey, request, new Metadata());
        expect(r.curve).toBe('secp256k1');
        expect(r.privateKey).toHaveLength(32);
        // The bytes are the key: they derive the address signer listed.
        expect(new Wallet(`0x${Buffer.from(r.privateKey).toString('hex')}`).address).toBe(key['address']);

        // Another org's id, a key id that is not the stored one, an unknown secret: NOT_FOUND.
        for (const wrong of [
          { ...request, orgId: stranger.orgId },
          { ...request, keyId: randomUUID() },
          { ...request, secretId: randomUUID() },
        ]) {
          await expect(
            callUnary(s.client, s.client.loadAgentKey, wrong, new Metadata()),
          ).rejects.toMatchObject({
            kind: 'not_found',
          });
        }
      } finally {
        s.close();
      }
      // One record for signer's one load (none for the refused callers), naming the key and purpose.
      const records = await auditOf(owner, 'secret.agent_key_loaded', before + 1);
      await new Promise((r) => setTimeout(r, 1000));
      expect(await auditCount(owner, 'secret.agent_key_loaded')).toBe(before + 1);
      expect(records[0]).toMatchObject({
        actor_type: 'system',
        actor_id: null,
        resource_id: secretId,
        details: { by: 'signer', purpose: 'sign', agent_id: agent.id, key_version: 1 },
      });
    });
  });
});
