import { randomBytes, randomUUID } from 'node:crypto';
import { Metadata } from '@grpc/grpc-js';
import { SigningKey as EthersKey, computeAddress, getAddress } from 'ethers';
import { IdentityServiceClient } from '@custos/proto/custos/identity/v1/service';
import { AgentKeyVaultServiceClient } from '@custos/proto/custos/vault_crypto/v1/agent_keys';
import { callUnary } from '@custos/service-kit';
import { waitFor } from '@custos/service-kit/testing';
import { TEST_PASSWORD, api, expectProblem, quickUser } from '../src/api';
import { sqlOn } from '../src/db';
import { type Mesh, type ServiceName, sharedMesh } from '../src/mesh';
import { invitedMember } from '../src/members';
import { grpcClientAs } from '../src/mesh-grpc';

// Issue 17, first slice: the chains registry (signer), the local anvil chain of dev mode and tests,
// and agents' signing keys generated inside signer with their private half sealed by vault-crypto
// in the org's `__agent-keys` vault (an RPC only signer's certificate may call).

type User = Awaited<ReturnType<typeof quickUser>>;
type Body = Record<string, unknown>;

// The shared meshes name ops@example.org a platform admin too; only this spec signs it up.
const ADMIN_EMAIL = 'ops@example.org';

describe('signer: chains registry, anvil, agent signing keys', () => {
  let mesh: Mesh;
  let admin: string;
  let owner: User;
  let stranger: User;
  let agentId: string;
  let agentToken: string;
  // Everything the API answered in this spec, scanned for private keys at the end.
  const seen: string[] = [];

  const call = async (method: string, path: string, opts: { token?: string; body?: unknown } = {}) => {
    const r = await api(mesh, method, path, opts);
    seen.push(JSON.stringify(r.body));
    return r;
  };

  async function newAgent(user: User): Promise<{ id: string; token: string }> {
    const created = await call('POST', '/v1/agents', {
      token: user.token,
      body: { name: `signer-bot-${randomBytes(3).toString('hex')}` },
    });
    expect(created.status).toBe(201);
    const id = (created.body['agent'] as { id: string }).id;
    const t = await api(mesh, 'POST', '/v1/auth/agent-token', {
      body: { agent_id: id, api_key: created.body['api_key'] },
    });
    expect(t.status).toBe(200);
    return { id, token: t.body['access_token'] as string };
  }

  beforeAll(async () => {
    mesh = await sharedMesh();
    let signup = await api(mesh, 'POST', '/v1/auth/signup', {
      body: { email: ADMIN_EMAIL, password: TEST_PASSWORD },
    });
    if (signup.status !== 201) {
      signup = await api(mesh, 'POST', '/v1/auth/token', {
        body: { email: ADMIN_EMAIL, password: TEST_PASSWORD },
      });
    }
    admin = signup.body['access_token'] as string;
    if (typeof admin !== 'string')
      throw new Error(
        `admin sign-in: ${signup.status} ${JSON.stringify(signup.body)} ${(mesh.output.get('identity') ?? [])
          .filter((l) => l.includes('error'))
          .slice(-3)
          .join('\n')}`,
      );
    owner = await quickUser(mesh);
    stranger = await quickUser(mesh);
    const a = await newAgent(owner);
    agentId = a.id;
    agentToken = a.token;
  });
  afterAll(() => mesh?.stop());

  const orgMember = (inviter: User, role: 'member' | 'admin') => invitedMember(mesh, inviter, role);

  const keysOf = async (id: string, token = owner.token) => {
    const r = await call('GET', `/v1/agents/${id}/signing-keys`, { token });
    expect(r.status).toBe(200);
    return r.body['keys'] as Body[];
  };

  describe('chains', () => {
    it('lists the seeded chains and the local anvil chain to users and agents', async () => {
      const r = await call('GET', '/v1/chains', { token: owner.token });
      expect(r.status).toBe(200);
      const chains = r.body['chains'] as Body[];
      const byName = new Map(chains.map((c) => [c['name'], c]));
      for (const [name, id] of [
        ['ethereum', 1],
        ['sepolia', 11155111],
        ['base', 8453],
        ['optimism', 10],
        ['arbitrum', 42161],
        ['polygon', 137],
      ] as const) {
        expect(byName.get(name)).toMatchObject({ chain_id: id, family: 'evm', is_enabled: true });
      }
      for (const family of ['bitcoin', 'solana', 'xrp', 'cardano', 'tron']) {
        expect(byName.get(family)).toMatchObject({ family, is_enabled: true });
      }
      expect(byName.get('sepolia')).toMatchObject({ is_testnet: true });
      const rpcUrl = mesh.env['LOCAL_EVM_RPC_URL'];
      expect(rpcUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      // The endpoint itself is a platform admin's to read (a provider URL often holds its key).
      expect(byName.get('anvil')).toMatchObject({
        chain_id: 31337,
        is_testnet: true,
        is_enabled: true,
        rpc_url: null,
        ws_url: null,
        rpc_configured: true,
        native_currency: 'ETH',
        native_decimals: 18,
      });
      expect((await call('GET', '/v1/chains/anvil', { token: admin })).body).toMatchObject({
        rpc_url: rpcUrl,
        rpc_configured: true,
      });
      // The registered URL is a live chain with that id.
      const res = await fetch(rpcUrl!, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
      });
      expect(((await res.json()) as { result: string }).result).toBe('0x7a69');

      const asAgent = await call('GET', '/v1/chains', { token: agentToken });
      expect(asAgent.status).toBe(200);
      expectProblem(await api(mesh, 'GET', '/v1/chains'), 401);
    });

    it('finds one chain by name (any case), numeric chain_id or UUID; 404 otherwise', async () => {
      const byName = await call('GET', '/v1/chains/Anvil', { token: owner.token });
      expect(byName.body).toMatchObject({ name: 'anvil', chain_id: 31337 });
      const byNumber = await call('GET', '/v1/chains/8453', { token: agentToken });
      expect(byNumber.body).toMatchObject({ name: 'base' });
      const byId = await call('GET', `/v1/chains/${byName.body['id'] as string}`, { token: owner.token });
      expect(byId.body).toMatchObject({ name: 'anvil' });
      expectProblem(await call('GET', '/v1/chains/dogechain', { token: owner.token }), 404);
      expectProblem(await call('GET', '/v1/chains/424242', { token: owner.token }), 404);
    });

    it('lets only a platform admin add, change and disable chains (403 to others, nothing changed)', async () => {
      const name = `testchain-${randomBytes(3).toString('hex')}`;
      const chainId = 900_000 + Math.floor(Math.random() * 90_000);
      const body = {
        name,
        display_name: 'Test Chain',
        chain_id: chainId,
        rpc_url: 'https://rpc.test.example',
      };
      for (const token of [owner.token, agentToken]) {
        expectProblem(await call('GET', '/v1/admin/chains', { token }), 403);
        expectProblem(await call('POST', '/v1/admin/chains', { token, body }), 403);
        expectProblem(
          await call('PATCH', '/v1/admin/chains/ethereum', { token, body: { is_enabled: false } }),
          403,
        );
      }
      const adminList = async () =>
        ((await call('GET', '/v1/admin/chains', { token: admin })).body['chains'] as Body[]) ?? [];
      expect((await adminList()).some((c) => c['name'] === name)).toBe(false);
      expect((await adminList()).find((c) => c['name'] === 'ethereum')).toMatchObject({ is_enabled: true });

      // Bad input names the field; nothing is added.
      expectProblem(
        await call('POST', '/v1/admin/chains', {
          token: admin,
          body: { ...body, rpc_url: 'ftp://x.example' },
        }),
        400,
        { field: 'rpc_url' },
      );
      expectProblem(
        await call('POST', '/v1/admin/chains', { token: admin, body: { ...body, name: 'Has Space' } }),
        400,
        {
          field: 'name',
        },
      );
      expect((await adminList()).some((c) => c['name'] === name)).toBe(false);

      const created = await call('POST', '/v1/admin/chains', { token: admin, body });
      expect(created.status).toBe(201);
      expect(created.body).toMatchObject({
        name,
        chain_id: chainId,
        family: 'evm',
        is_enabled: true,
        native_currency: 'ETH',
      });
      expectProblem(await call('POST', '/v1/admin/chains', { token: admin, body }), 409);

      // Disabled: gone from users' list and lookups, still in the admin's; no key is made on it.
      const disabled = await call('PATCH', `/v1/admin/chains/${name}`, {
        token: admin,
        body: { is_enabled: false },
      });
      expect(disabled.status).toBe(200);
      expect(disabled.body).toMatchObject({ is_enabled: false, rpc_url: 'https://rpc.test.example' });
      const list = (await call('GET', '/v1/chains', { token: owner.token })).body['chains'] as Body[];
      expect(list.some((c) => c['name'] === name)).toBe(false);
      expectProblem(await call('GET', `/v1/chains/${name}`, { token: owner.token }), 404);
      expect((await call('GET', `/v1/chains/${name}`, { token: admin })).body).toMatchObject({
        is_enabled: false,
      });
      const agent = await newAgent(owner);
      expectProblem(
        await call('POST', `/v1/agents/${agent.id}/signing-keys`, {
          token: owner.token,
          body: { chain: name },
        }),
        400,
        { field: 'chain', detail: expect.stringContaining('disabled') },
      );
      expect(await keysOf(agent.id)).toEqual([]);

      const enabled = await call('PATCH', `/v1/admin/chains/${chainId}`, {
        token: admin,
        body: { is_enabled: true, rpc_url: '' },
      });
      expect(enabled.body).toMatchObject({ is_enabled: true, rpc_url: null, rpc_configured: false });
      expectProblem(
        await call('PATCH', '/v1/admin/chains/no-such-chain', { token: admin, body: { is_enabled: true } }),
        404,
      );
    });
  });

  it('shows an rpc_url holding a provider key to platform admins only; others learn rpc_configured', async () => {
    const name = `keyed-${randomBytes(3).toString('hex')}`;
    const apiKey = `KEY-${randomBytes(8).toString('hex')}`;
    const made = await call('POST', '/v1/admin/chains', {
      token: admin,
      body: {
        name,
        display_name: 'Keyed',
        chain_id: 900_000 + Math.floor(Math.random() * 90_000),
        rpc_url: `https://eth.provider.example/v2/${apiKey}`,
        ws_url: `wss://eth.provider.example/v2/${apiKey}`,
      },
    });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({ rpc_url: expect.stringContaining(apiKey), rpc_configured: true });
    const agent = await newAgent(owner);
    for (const token of [owner.token, agent.token]) {
      const one = await call('GET', `/v1/chains/${name}`, { token });
      expect(one.status).toBe(200);
      expect(one.body).toMatchObject({ name, rpc_url: null, ws_url: null, rpc_configured: true });
      const list = await call('GET', '/v1/chains', { token });
      expect(list.status).toBe(200);
      expect(JSON.stringify(list.body)).not.toContain(apiKey);
      expect(JSON.stringify(one.body)).not.toContain(apiKey);
    }
    const asAdmin = await call('GET', `/v1/chains/${name}`, { token: admin });
    expect(asAdmin.body).toMatchObject({
      rpc_url: `https://eth.provider.example/v2/${apiKey}`,
      ws_url: `wss://eth.provider.example/v2/${apiKey}`,
      rpc_configured: true,
    });
    const adminList = (await call('GET', '/v1/chains', { token: admin })).body['chains'] as Body[];
    expect(adminList.find((c) => c['name'] === name)).toMatchObject({
      rpc_url: expect.stringContaining(apiKey),
    });
  });

  describe('signing keys', () => {
    let key: Body;

    it('a human of the org creates the agent an EVM key: checksummed address, server custody', async () => {
      const r = await call('POST', `/v1/agents/${agentId}/signing-keys`, {
        token: owner.token,
        body: { chain: 'ethereum' },
      });
      expect(r.status).toBe(201);
      key = r.body;
      expect(key).toMatchObject({
        agent_id: agentId,
        chain: 'ethereum',
        curve: 'secp256k1',
        key_version: 1,
        is_active: true,
        custody: 'server',
        rotated_at: null,
      });
      const address = key['address'] as string;
      expect(address).toMatch(/^0x[0-9a-fA-F]{40}$/);
      expect(getAddress(address.toLowerCase())).toBe(address);
      expect(address).not.toBe(address.toLowerCase());
      expect(computeAddress(key['public_key'] as string)).toBe(address);
      expect(Object.keys(key).some((k) => /private|secret/i.test(k))).toBe(false);
    });

    it('refuses a second active key for the EVM family (409), an unknown chain (400 naming chain), non-EVM and non-server custody', async () => {
      expectProblem(
        await call('POST', `/v1/agents/${agentId}/signing-keys`, {
          token: owner.token,
          body: { chain: 'ethereum' },
        }),
        409,
      );
      // Base is an EVM chain: the agent's one EVM key serves it.
      expectProblem(
        await call('POST', `/v1/agents/${agentId}/signing-keys`, {
          token: owner.token,
          body: { chain: 8453 },
        }),
        409,
      );
      const fresh = await newAgent(owner);
      const refusals: Array<[Body, string, RegExp]> = [
        [{ chain: 'dogechain' }, 'chain', /unknown chain/],
        [{ chain: 'ethereum', custody: 'passkey_owner' }, 'custody', /server/],
        [{}, 'chain', /./],
      ];
      for (const [body, field, detail] of refusals) {
        expectProblem(
          await call('POST', `/v1/agents/${fresh.id}/signing-keys`, { token: owner.token, body }),
          400,
          {
            field,
            detail: expect.stringMatching(detail),
          },
        );
      }
      // Every family of the registry takes keys now (issue 18): a Bitcoin key is secp256k1 with the
      // mainnet P2WPKH address; a second active one for the family is 409 as on EVM.
      const btcAgent = await newAgent(owner);
      const btc = await call('POST', `/v1/agents/${btcAgent.id}/signing-keys`, {
        token: owner.token,
        body: { chain: 'bitcoin' },
      });
      expect({ status: btc.status, body: btc.body }).toMatchObject({
        status: 201,
        body: {
          chain: 'bitcoin',
          curve: 'secp256k1',
          address: expect.stringMatching(/^bc1q[02-9ac-hj-np-z]{38}$/),
        },
      });
      expectProblem(
        await call('POST', `/v1/agents/${btcAgent.id}/signing-keys`, {
          token: owner.token,
          body: { chain: 'bitcoin' },
        }),
        409,
      );
      expect(await keysOf(fresh.id)).toEqual([]);
    });

    it('8 parallel creates for one agent make exactly one key; the others answer 409', async () => {
      const fresh = await newAgent(owner);
      const results = await Promise.all(
        ['ethereum', 'base', 'anvil', 'polygon', 'ethereum', '1', 'optimism', 'arbitrum'].map((chain) =>
          call('POST', `/v1/agents/${fresh.id}/signing-keys`, { token: owner.token, body: { chain } }),
        ),
      );
      expect(results.filter((r) => r.status === 201)).toHaveLength(1);
      for (const r of results.filter((x) => x.status !== 201)) expectProblem(r, 409);
      const keys = await keysOf(fresh.id);
      expect(keys).toHaveLength(1);
      expect(keys[0]).toMatchObject({ key_version: 1, is_active: true });
    });

    it('parallel rotations leave one active version and a version per successful rotation', async () => {
      const fresh = await newAgent(owner);
      const made = await call('POST', `/v1/agents/${fresh.id}/signing-keys`, {
        token: owner.token,
        body: { chain: 'anvil' },
      });
      expect(made.status).toBe(201);
      const results = await Promise.all(
        Array.from({ length: 6 }, () =>
          call('POST', `/v1/agents/${fresh.id}/signing-keys/ethereum/rotate`, { token: owner.token }),
        ),
      );
      const ok = results.filter((r) => r.status === 200);
      expect(ok.length).toBeGreaterThanOrEqual(1);
      for (const r of results.filter((x) => x.status !== 200)) expectProblem(r, 409);
      const keys = await keysOf(fresh.id);
      expect(keys).toHaveLength(1 + ok.length);
      expect(keys.filter((k) => k['is_active'])).toHaveLength(1);
      expect(new Set(keys.map((k) => k['key_version'])).size).toBe(keys.length);
      expect(new Set(keys.map((k) => k['address'])).size).toBe(keys.length);
    });

    it('refuses a plain member of the org (403) to create and rotate keys; nothing is made; an admin may', async () => {
      // An org of its own, so its audit records stay apart from the owner's checked below.
      const boss = await quickUser(mesh);
      const m = await orgMember(boss, 'member');
      const fresh = await newAgent(boss);
      const create = (token: string, chain = 'anvil') =>
        call('POST', `/v1/agents/${fresh.id}/signing-keys`, { token, body: { chain } });
      const refused = await create(m.token);
      expectProblem(refused, 403, { detail: expect.stringContaining('owners and admins') });
      expect(await keysOf(fresh.id, boss.token)).toEqual([]);
      // Members of the org may list the agent's keys.
      expect(await keysOf(fresh.id, m.token)).toEqual([]);

      const made = await create(boss.token);
      expect(made.status).toBe(201);
      expectProblem(
        await call('POST', `/v1/agents/${fresh.id}/signing-keys/ethereum/rotate`, { token: m.token }),
        403,
      );
      const after = await keysOf(fresh.id, m.token);
      expect(after).toHaveLength(1);
      expect(after[0]).toMatchObject({ id: made.body['id'], key_version: 1, is_active: true });

      const a = await orgMember(boss, 'admin');
      const rotated = await call('POST', `/v1/agents/${fresh.id}/signing-keys/ethereum/rotate`, {
        token: a.token,
      });
      expect(rotated.status).toBe(200);
      expect(rotated.body).toMatchObject({ key_version: 2, previous: { id: made.body['id'] } });
    });

    it('refuses agents (403) and other orgs (404); nothing is created', async () => {
      expectProblem(
        await call('POST', `/v1/agents/${agentId}/signing-keys`, {
          token: agentToken,
          body: { chain: 'anvil' },
        }),
        403,
      );
      expectProblem(
        await call('POST', `/v1/agents/${agentId}/signing-keys`, {
          token: stranger.token,
          body: { chain: 'anvil' },
        }),
        404,
      );
      expectProblem(await call('GET', `/v1/agents/${agentId}/signing-keys`, { token: stranger.token }), 404);
      expectProblem(
        await call('POST', `/v1/agents/${agentId}/signing-keys/ethereum/rotate`, { token: stranger.token }),
        404,
      );
      expectProblem(
        await call('POST', `/v1/agents/${agentId}/signing-keys/ethereum/rotate`, { token: agentToken }),
        403,
      );
      // Another agent of the same org cannot list this one's keys; the agent itself can.
      const other = await newAgent(owner);
      expectProblem(await call('GET', `/v1/agents/${agentId}/signing-keys`, { token: other.token }), 404);
      const own = await keysOf(agentId, agentToken);
      expect(own).toHaveLength(1);
      expect(own[0]).toMatchObject({ id: key['id'], custody: 'server', address: key['address'] });
    });

    it('rotation makes version 2, keeps version 1 listed inactive, audits and emits signing_key.rotated', async () => {
      const r = await call('POST', `/v1/agents/${agentId}/signing-keys/ethereum/rotate`, {
        token: owner.token,
      });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ chain: 'ethereum', key_version: 2, is_active: true, custody: 'server' });
      expect(r.body['address']).not.toBe(key['address']);
      expect(r.body['previous']).toMatchObject({ id: key['id'], key_version: 1, is_active: false });
      expect((r.body['previous'] as Body)['rotated_at']).toEqual(expect.any(String));
      const keys = await keysOf(agentId);
      expect(keys.map((k) => [k['key_version'], k['is_active']])).toEqual([
        [2, true],
        [1, false],
      ]);
      // A rotation of a family without a key is a 404.
      const fresh = await newAgent(owner);
      expectProblem(
        await call('POST', `/v1/agents/${fresh.id}/signing-keys/ethereum/rotate`, { token: owner.token }),
        404,
      );

      const events = await sqlOn<{ payload: Body; org_id: string }>(
        mesh,
        `SELECT payload, org_id FROM signer.outbox WHERE name = 'signing_key.rotated' AND payload->>'key_id' = $1`,
        [r.body['id']],
      );
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({
        org_id: owner.orgId,
        payload: {
          agent_id: agentId,
          chain: 'ethereum',
          key_version: 2,
          previous_key_version: 1,
          address: r.body['address'],
        },
      });
      seen.push(JSON.stringify(events));

      // Signer's records name the human; vault-crypto's record of each sealed key names no user.
      for (const [action, n, actor] of [
        ['signing_key.created', 1, { actor_type: 'user', actor_id: owner.userId }],
        ['signing_key.rotated', 1, { actor_type: 'user', actor_id: owner.userId }],
        ['secret.agent_key_stored', 2, { actor_type: 'system', actor_id: null }],
      ] as const) {
        const records = await waitFor(
          async () => {
            const a = await call('GET', `/v1/audit/events?limit=100&action=${action}`, {
              token: owner.token,
            });
            const list = (a.body['events'] as Body[] | undefined) ?? [];
            return list.length >= n ? list : undefined;
          },
          30000,
          200,
        ).catch(async (err: Error) => {
          const rows = await sqlOn(mesh, 'SELECT name, published_at FROM signer.outbox ORDER BY seq');
          const logs = [...mesh.output.entries()].flatMap(([svc, ls]) =>
            ls.filter((l) => /error|warn/.test(l)).map((l) => `${svc}: ${l}`),
          );
          const last = await call('GET', `/v1/audit/events?limit=100&action=${action}`, {
            token: owner.token,
          });
          throw new Error(
            `${err.message}: ${JSON.stringify(last.body)} ${JSON.stringify(rows)}\n${logs.slice(-10).join('\n')}`,
          );
        });
        expect(records[0]).toMatchObject(actor);
      }
    });

    it("seals the private half in the org's __agent-keys vault as ciphertext, unreachable through the secrets API", async () => {
      const rows = await sqlOn<{ path: string; type: string; ciphertext: Buffer; vault_id: string }>(
        mesh,
        `SELECT s.path, s.type, s.ciphertext, s.vault_id FROM vault_crypto.secret_versions s
           JOIN vault_crypto.vaults v ON v.id = s.vault_id
          WHERE v.org_id = $1 AND v.name = '__agent-keys' AND s.path LIKE $2 ORDER BY s.created_at`,
        [owner.orgId, `agents/${agentId}/ethereum/%`],
      );
      expect(rows).toHaveLength(2);
      const keys = await keysOf(agentId);
      for (const row of rows) {
        expect(row.type).toBe('private_key');
        expect(row.ciphertext).toHaveLength(32);
        // Were the stored bytes the key itself, they would derive one of the agent's addresses.
        const derived = computeAddress(new EthersKey(`0x${row.ciphertext.toString('hex')}`).publicKey);
        expect(keys.map((k) => k['address'])).not.toContain(derived);
      }
      // The general secrets API refuses the system vault even to the org owner.
      const vaultId = rows[0]!.vault_id;
      expectProblem(
        await call('GET', `/v1/vaults/${vaultId}/secrets/${rows[0]!.path}`, { token: owner.token }),
        403,
      );
    });

    it('no response, log line, event or audit record holds a private key of any address made here', async () => {
      const addresses = new Set(
        (await sqlOn<{ address: string }>(mesh, 'SELECT address FROM signer.signing_keys')).map(
          (r) => r.address,
        ),
      );
      expect(addresses.size).toBeGreaterThan(0);
      const outboxes = await sqlOn<{ payload: unknown }>(
        mesh,
        `SELECT payload FROM signer.outbox UNION ALL SELECT payload FROM vault_crypto.outbox`,
      );
      const logs = [...mesh.output.values()].flat();
      const corpus = [...seen, ...logs, ...outboxes.map((o) => JSON.stringify(o.payload))].join('\n');
      const candidates = new Set(corpus.match(/[0-9a-fA-F]{64}/g) ?? []);
      for (const hex of candidates) {
        let derived: string;
        try {
          derived = computeAddress(new EthersKey(`0x${hex}`).publicKey);
        } catch {
          continue; // not a valid secp256k1 scalar
        }
        expect(addresses.has(derived)).toBe(false);
      }
      expect(corpus).not.toMatch(/private_key"\s*:\s*"[0-9a-fx]{64,66}"/i);
    });
  });

  describe("vault-crypto's AgentKeyVaultService answers signer's certificate only", () => {
    const storedCount = async () =>
      Number(
        (
          await sqlOn<{ n: string }>(
            mesh,
            `SELECT count(*) AS n FROM vault_crypto.secret_versions s JOIN vault_crypto.vaults v ON v.id = s.vault_id
              WHERE v.org_id = $1 AND v.name = '__agent-keys'`,
            [owner.orgId],
          )
        )[0]!.n,
      );

    it('refuses every other service, even one with a user token; signer itself is answered', async () => {
      const before = await storedCount();
      const request = () => ({
        orgId: owner.orgId,
        agentId,
        chain: 'ethereum',
        keyId: randomUUID(),
        keyVersion: 9,
        curve: 'secp256k1',
        privateKey: randomBytes(32),
      });
      const md = new Metadata();
      md.set('authorization', `Bearer ${owner.token}`);
      const others: ServiceName[] = [
        'gateway',
        'identity',
        'webhook-dispatcher',
        'policy',
        'approvals',
        'billing',
        'audit',
      ];
      for (const as of others) {
        const c = grpcClientAs(mesh, as, AgentKeyVaultServiceClient, 'vault-crypto');
        try {
          await expect(callUnary(c.client, c.client.storeAgentKey, request(), md)).rejects.toMatchObject({
            kind: 'permission_denied',
          });
        } finally {
          c.close();
        }
      }
      expect(await storedCount()).toBe(before);
      // The same request with signer's certificate is stored: the refusals were the caller.
      const s = grpcClientAs(mesh, 'signer', AgentKeyVaultServiceClient, 'vault-crypto');
      try {
        const r = await callUnary(s.client, s.client.storeAgentKey, request(), new Metadata());
        expect(r.path).toMatch(new RegExp(`^agents/${agentId}/ethereum/`));
      } finally {
        s.close();
      }
      expect(await storedCount()).toBe(before + 1);
    });
  });

  describe("identity's GetOrgAgent answers signer's certificate only", () => {
    it('tells signer whether an agent is in an org (404 for another org); refuses every other service', async () => {
      const s = grpcClientAs(mesh, 'signer', IdentityServiceClient, 'identity');
      try {
        const r = await callUnary(
          s.client,
          s.client.getOrgAgent,
          { orgId: owner.orgId, agentId },
          new Metadata(),
        );
        expect(r.agent).toMatchObject({ id: agentId, orgId: owner.orgId });
        await expect(
          callUnary(s.client, s.client.getOrgAgent, { orgId: stranger.orgId, agentId }, new Metadata()),
        ).rejects.toMatchObject({ kind: 'not_found' });
        await expect(
          callUnary(s.client, s.client.getOrgAgent, { orgId: 'nope', agentId }, new Metadata()),
        ).rejects.toMatchObject({ kind: 'invalid_argument' });
      } finally {
        s.close();
      }
      const md = new Metadata();
      md.set('authorization', `Bearer ${owner.token}`);
      for (const as of ['gateway', 'vault-crypto', 'policy', 'audit'] as ServiceName[]) {
        const c = grpcClientAs(mesh, as, IdentityServiceClient, 'identity');
        try {
          await expect(
            callUnary(c.client, c.client.getOrgAgent, { orgId: owner.orgId, agentId }, md),
          ).rejects.toMatchObject({ kind: 'permission_denied' });
        } finally {
          c.close();
        }
      }
    });
  });
});
