import { randomBytes, randomUUID } from 'node:crypto';
import { Metadata } from '@grpc/grpc-js';
import { Keypair } from '@solana/web3.js';
import { Wallet } from 'ethers';
import { AgentKeyVaultServiceClient } from '@custos/proto/custos/vault_crypto/v1/agent_keys';
import { callUnary } from '@custos/service-kit';
import { waitFor } from '@custos/service-kit/testing';
import { TEST_PASSWORD, api, expectProblem, quickUser } from '../src/api';
import { sqlOn } from '../src/db';
import { type Mesh, type ServiceName, sharedMesh } from '../src/mesh';
import { invitedMember } from '../src/members';
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

  const orgMember = (inviter: User, role: 'member' | 'admin') => invitedMember(mesh, inviter, role);

  const keysOf = async (id: string, token = owner.token) => {
    const r = await call('GET', `/v1/agents/${id}/signing-keys`, { token });
    expect(r.status).toBe(200);
    return r.body['keys'] as Body[];
  };

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

  /** The org's audit records of an action once `ok` holds for their reasons (records travel through outboxes). */
  async function auditUntil(
    user: User,
    action: string,
    ok: (reasons: unknown[]) => boolean,
  ): Promise<Body[]> {
    return waitFor(
      async () => {
        const a = await call('GET', `/v1/audit/events?limit=100&action=${action}`, { token: user.token });
        const list = (a.body['events'] as Body[] | undefined) ?? [];
        return ok(list.map((e) => (e['details'] as Body | undefined)?.['reason'])) ? list : undefined;
      },
      30000,
      200,
    );
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

  /** A rat_ token of the owner for `purpose`. */
  async function rat(user: User, purpose: string): Promise<string> {
    const r = await api(mesh, 'POST', '/v1/auth/reauth', {
      token: user.token,
      body: { purpose, password: TEST_PASSWORD },
    });
    expect(r.status).toBe(200);
    return r.body['token'] as string;
  }

  // Export answers carry private keys: kept apart from `seen`, which is scanned for keys at the end.
  const exportPath = (agent: string, chain = 'ethereum') =>
    `/v1/agents/${agent}/signing-keys/${chain}/export`;
  const importPath = (agent: string, chain = 'ethereum') =>
    `/v1/agents/${agent}/signing-keys/${chain}/import`;
  const exportOnce = (agent: string, opts: { token?: string; confirm?: string } = {}) =>
    api(mesh, 'POST', exportPath(agent), opts);
  const loadsFor = async (keyId: string, purpose: string) =>
    Number(
      (
        await sqlOn<{ n: string }>(
          mesh,
          `SELECT count(*) AS n FROM vault_crypto.outbox
            WHERE payload->>'action' = 'secret.agent_key_loaded' AND payload->'metadata'->>'purpose' = $1
              AND payload->>'resource_id' IN (SELECT vault_secret_id::text FROM signer.signing_keys WHERE id = $2)`,
          [purpose, keyId],
        )
      )[0]!.n,
    );

  describe('export', () => {
    it('an owner exports with the password: the key derives the listed address; audited without the key; no-store', async () => {
      const { agent, key } = await agentWithKey(owner);
      const r = await exportOnce(agent.id, { token: owner.token, confirm: TEST_PASSWORD });
      expect(r.status).toBe(200);
      expect(r.headers.get('cache-control')).toBe('no-store');
      expect(r.body).toMatchObject({
        id: key['id'],
        agent_id: agent.id,
        chain: 'ethereum',
        curve: 'secp256k1',
        public_key: key['public_key'],
        address: key['address'],
        key_version: 1,
      });
      const pk = r.body['private_key'] as string;
      expect(pk).toMatch(/^0x[0-9a-f]{64}$/);
      const w = new Wallet(pk);
      expect(w.address).toBe(key['address']);
      expect(w.signingKey.publicKey).toBe(key['public_key']);

      const [rec] = await auditOf(owner, 'signing_key.export');
      expect(rec).toMatchObject({
        actor_type: 'user',
        actor_id: owner.userId,
        resource_type: 'signing_key',
        resource_id: key['id'],
        details: { key_id: key['id'], key_version: 1, address: key['address'], agent_id: agent.id },
      });
      expect(JSON.stringify(rec).toLowerCase()).not.toContain(pk.slice(2));
      expect(await loadsFor(key['id'] as string, 'export')).toBe(1);
    });

    it('a rat_ token of the purpose works once; one of another purpose does not', async () => {
      const { agent, key } = await agentWithKey(owner);
      const good = await rat(owner, 'agent.signing_key.export');
      expect((await exportOnce(agent.id, { token: owner.token, confirm: good })).status).toBe(200);
      expectProblem(await call('POST', exportPath(agent.id), { token: owner.token, confirm: good }), 403, {
        type: 'step_up_required',
      });
      const other = await rat(owner, 'agent.signing_key.import');
      expectProblem(await call('POST', exportPath(agent.id), { token: owner.token, confirm: other }), 403, {
        type: 'step_up_required',
      });
      expect(await loadsFor(key['id'] as string, 'export')).toBe(1);
    });

    it('refusals: no step-up 401, a wrong one 403 (audited), members and agents 403, another org 404, bad chain 400, no key 404; nothing exported', async () => {
      const { agent, key } = await agentWithKey(owner);
      const exportsBefore = await auditCount(owner, 'signing_key.export');
      const refusedBefore = await auditCount(owner, 'signing_key.export.refused');

      const challenge = await call('POST', exportPath(agent.id), { token: owner.token });
      expectProblem(challenge, 401, { type: 'step_up_required', purpose: 'agent.signing_key.export' });

      const wrong = await call('POST', exportPath(agent.id), {
        token: owner.token,
        confirm: 'Wrong-9-password',
      });
      expectProblem(wrong, 403, { type: 'step_up_required' });
      expect(wrong.body['private_key']).toBeUndefined();

      const member = await orgMember(owner, 'member');
      const m = await call('POST', exportPath(agent.id), { token: member.token, confirm: TEST_PASSWORD });
      expectProblem(m, 403);
      expect(m.body['type']).not.toBe('step_up_required');
      expectProblem(
        await call('POST', exportPath(agent.id), { token: agent.token, confirm: TEST_PASSWORD }),
        403,
      );
      expectProblem(
        await call('POST', exportPath(agent.id), { token: stranger.token, confirm: TEST_PASSWORD }),
        404,
      );
      expectProblem(
        await call('POST', exportPath(agent.id, 'dogechain'), { token: owner.token, confirm: TEST_PASSWORD }),
        400,
        { field: 'chain' },
      );
      const bare = await newAgent(owner);
      expectProblem(
        await call('POST', exportPath(bare.id), { token: owner.token, confirm: TEST_PASSWORD }),
        404,
      );

      expect(await loadsFor(key['id'] as string, 'export')).toBe(0);
      expect(await auditCount(owner, 'signing_key.export')).toBe(exportsBefore);
      // The wrong step-up, the member, the bad chain and the missing key are recorded by signer
      // (the challenge, the agent and the stranger never reach it or name no org of the owner's).
      const wanted = ['step_up_required', 'permission_denied', 'invalid_argument', 'not_found'];
      const refused = await auditUntil(
        owner,
        'signing_key.export.refused',
        (reasons) => reasons.length >= refusedBefore + 4 && wanted.every((w) => reasons.includes(w)),
      );
      expect(refused.find((e) => (e['details'] as Body)['reason'] === 'step_up_required')).toMatchObject({
        actor_id: owner.userId,
        resource_type: 'agent',
        resource_id: agent.id,
        details: { status: 403 },
      });
      // Identity records the failed step-up too.
      expect((await auditOf(owner, 'auth.reauth_failed')).length).toBeGreaterThan(0);
    });
  });

  describe('import', () => {
    // A key that exists only in this test: it must never appear in any log, event or record.
    const canary = Wallet.createRandom();
    const canaryHex = canary.privateKey.slice(2).toLowerCase();

    it('imports a key as version 1 (address as ethers derives it), then a second as a rotation; export gives it back', async () => {
      const agent = await newAgent(owner);
      const first = await call('POST', importPath(agent.id), {
        token: owner.token,
        confirm: TEST_PASSWORD,
        body: { private_key: canary.privateKey },
      });
      expect(first.status).toBe(201);
      expect(first.body).toMatchObject({
        agent_id: agent.id,
        chain: 'ethereum',
        custody: 'server',
        key_version: 1,
        is_active: true,
        address: canary.address,
        public_key: canary.signingKey.publicKey,
        previous: null,
      });
      expect(JSON.stringify(first.body).toLowerCase()).not.toContain(canaryHex);
      const back = await exportOnce(agent.id, { token: owner.token, confirm: TEST_PASSWORD });
      expect(back.status).toBe(200);
      expect(back.body['private_key']).toBe(canary.privateKey);

      const second = Wallet.createRandom();
      const rotated = await call('POST', importPath(agent.id, 'anvil'), {
        token: owner.token,
        confirm: await rat(owner, 'agent.signing_key.import'),
        body: { private_key: second.privateKey.toUpperCase().replace('0X', '0x') },
      });
      expect(rotated.status).toBe(201);
      expect(rotated.body).toMatchObject({ key_version: 2, address: second.address, is_active: true });
      expect(rotated.body['previous']).toMatchObject({
        id: first.body['id'],
        key_version: 1,
        is_active: false,
      });
      const keys = await keysOf(agent.id);
      expect(keys.map((k) => [k['key_version'], k['is_active'], k['address']])).toEqual([
        [2, true, second.address],
        [1, false, canary.address],
      ]);
      const events = await sqlOn<{ payload: Body }>(
        mesh,
        `SELECT payload FROM signer.outbox WHERE name = 'signing_key.rotated' AND payload->>'key_id' = $1`,
        [rotated.body['id']],
      );
      expect(events).toHaveLength(1);
      expect(events[0]!.payload).toMatchObject({
        source: 'import',
        address: second.address,
        previous_key_id: first.body['id'],
        previous_address: canary.address,
      });
      const imports = await auditOf(owner, 'signing_key.import', 2);
      expect(imports.map((e) => e['resource_id'])).toEqual(
        expect.arrayContaining([first.body['id'], rotated.body['id']]),
      );
      expect(await auditOf(owner, 'signing_key.rotated')).toEqual(
        expect.arrayContaining([expect.objectContaining({ resource_id: rotated.body['id'] })]),
      );
    });

    it('imports and exports keys of the other families too: a Solana key is its 32-byte seed, at the address web3.js derives', async () => {
      const agent = await newAgent(owner);
      const seed = randomBytes(32);
      const kp = Keypair.fromSeed(seed);
      const imported = await call('POST', importPath(agent.id, 'solana'), {
        token: owner.token,
        confirm: TEST_PASSWORD,
        body: { private_key: `0x${seed.toString('hex')}` },
      });
      expect({ status: imported.status, body: imported.body }).toMatchObject({
        status: 201,
        body: { chain: 'solana', curve: 'ed25519', key_version: 1, address: kp.publicKey.toBase58() },
      });
      expect(JSON.stringify(imported.body).toLowerCase()).not.toContain(seed.toString('hex'));
      const back = await api(mesh, 'POST', exportPath(agent.id, 'solana'), {
        token: owner.token,
        confirm: TEST_PASSWORD,
      });
      expect(back.status).toBe(200);
      expect(back.body).toMatchObject({ chain: 'solana', private_key: `0x${seed.toString('hex')}` });
      // 0x hex of 32 bytes only: Solana's 64-byte secret key form is refused, naming the field.
      expectProblem(
        await call('POST', importPath(agent.id, 'solana'), {
          token: owner.token,
          confirm: TEST_PASSWORD,
          body: { private_key: `0x${Buffer.from(kp.secretKey).toString('hex')}` },
        }),
        400,
        { field: 'private_key' },
      );
    });

    it('refuses bad keys (400 naming private_key), missing or wrong step-up, members, agents and another org; nothing stored', async () => {
      const { agent } = await agentWithKey(owner);
      const before = await keysOf(agent.id);
      const N = 'fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141';
      for (const bad of [
        'nope',
        `0x${'ab'.repeat(31)}`,
        `0x${'0'.repeat(64)}`,
        `0x${N}`,
        'ab'.repeat(32),
        `0x${'g'.repeat(64)}`,
      ]) {
        const r = await call('POST', importPath(agent.id), {
          token: owner.token,
          confirm: TEST_PASSWORD,
          body: { private_key: bad },
        });
        expectProblem(r, 400, { field: 'private_key' });
        expect(String(r.body['detail'])).not.toContain(bad);
      }
      expectProblem(
        await call('POST', importPath(agent.id), { token: owner.token, confirm: TEST_PASSWORD, body: {} }),
        400,
        {
          field: 'private_key',
        },
      );
      const k = Wallet.createRandom().privateKey;
      expectProblem(
        await call('POST', importPath(agent.id), { token: owner.token, body: { private_key: k } }),
        401,
        {
          type: 'step_up_required',
          purpose: 'agent.signing_key.import',
        },
      );
      expectProblem(
        await call('POST', importPath(agent.id), {
          token: owner.token,
          confirm: 'Wrong-9-password',
          body: { private_key: k },
        }),
        403,
        { type: 'step_up_required' },
      );
      const member = await orgMember(owner, 'member');
      expectProblem(
        await call('POST', importPath(agent.id), {
          token: member.token,
          confirm: TEST_PASSWORD,
          body: { private_key: k },
        }),
        403,
      );
      expectProblem(
        await call('POST', importPath(agent.id), {
          token: agent.token,
          confirm: TEST_PASSWORD,
          body: { private_key: k },
        }),
        403,
      );
      expectProblem(
        await call('POST', importPath(agent.id), {
          token: stranger.token,
          confirm: TEST_PASSWORD,
          body: { private_key: k },
        }),
        404,
      );
      expect(await keysOf(agent.id)).toEqual(before);
      const refused = await auditUntil(
        owner,
        'signing_key.import.refused',
        (r) => r.includes('step_up_required') && r.includes('permission_denied') && r.length >= 8,
      );
      expect(refused.map((e) => (e['details'] as Body)['field'])).toContain('private_key');
    });

    it("another agent's active key is refused (409 naming private_key); two parallel imports of one key: one wins", async () => {
      const { key } = await agentWithKey(owner);
      // The key of an agent of this org cannot be imported for another (any org): export it first.
      const holder = await newAgent(owner);
      const held = Wallet.createRandom();
      expect(
        (
          await call('POST', importPath(holder.id), {
            token: owner.token,
            confirm: TEST_PASSWORD,
            body: { private_key: held.privateKey },
          })
        ).status,
      ).toBe(201);
      for (const who of [owner, stranger]) {
        const other = await newAgent(who);
        const r = await call('POST', importPath(other.id), {
          token: who.token,
          confirm: TEST_PASSWORD,
          body: { private_key: held.privateKey },
        });
        expectProblem(r, 409, { field: 'private_key' });
        expect(await keysOf(other.id, who.token)).toEqual([]);
      }
      expect(key['address']).not.toBe(held.address);

      const shared = Wallet.createRandom();
      const agents = await Promise.all([newAgent(owner), newAgent(owner), newAgent(owner), newAgent(owner)]);
      const results = await Promise.all(
        agents.map((a) =>
          call('POST', importPath(a.id), {
            token: owner.token,
            confirm: TEST_PASSWORD,
            body: { private_key: shared.privateKey },
          }),
        ),
      );
      expect(results.filter((r) => r.status === 201)).toHaveLength(1);
      for (const r of results.filter((x) => x.status !== 201))
        expectProblem(r, 409, { field: 'private_key' });
      const active = await sqlOn(
        mesh,
        `SELECT id FROM signer.signing_keys WHERE address = $1 AND is_active`,
        [shared.address],
      );
      expect(active).toHaveLength(1);
    });

    it('the canary key never appears in a log line, an event, an audit record or an answer', async () => {
      const outboxes = await sqlOn<{ payload: unknown }>(
        mesh,
        `SELECT payload FROM signer.outbox UNION ALL SELECT payload FROM vault_crypto.outbox`,
      );
      const audit = await call('GET', '/v1/audit/events?limit=100', { token: owner.token });
      const logs = [...mesh.output.values()].flat();
      const corpus = [
        ...seen,
        ...logs,
        JSON.stringify(audit.body),
        ...outboxes.map((o) => JSON.stringify(o.payload)),
      ]
        .join('\n')
        .toLowerCase();
      expect(logs.length).toBeGreaterThan(0);
      expect(corpus).toContain(canary.address.toLowerCase());
      expect(corpus).not.toContain(canaryHex);
      // Nor in base64, as bytes might be logged.
      expect(corpus).not.toContain(Buffer.from(canaryHex, 'hex').toString('base64').toLowerCase());
    });
  });

  describe('client_tss keys and client shares', () => {
    const sharePath = (keyId: string) => `/v1/keys/${keyId}/client-share`;
    const passkeyWrap = (ciphertext = randomBytes(60)) => ({
      type: 'passkey_prf',
      ciphertext: ciphertext.toString('base64'),
      algorithm: 'AES-256-GCM',
      nonce: randomBytes(12).toString('base64'),
      credential_id: randomBytes(32).toString('base64url'),
      salt: randomBytes(32).toString('base64'),
    });
    const recoveryWrap = (ciphertext = randomBytes(60)) => ({
      type: 'recovery_code',
      ciphertext: ciphertext.toString('base64'),
      algorithm: 'AES-256-GCM',
      nonce: randomBytes(12).toString('base64'),
      salt: randomBytes(16).toString('base64'),
      kdf: 'argon2id',
      kdf_params: { m: 65536, t: 3, p: 1 },
    });
    const storedRows = async (keyId: string) =>
      sqlOn<{ type: string; ciphertext: Buffer }>(
        mesh,
        'SELECT type, ciphertext FROM signer.client_share_wraps WHERE key_id = $1 ORDER BY type',
        [keyId],
      );

    async function tssAgent(): Promise<{ agent: { id: string; token: string }; key: Body }> {
      const agent = await newAgent(owner);
      const r = await call('POST', `/v1/agents/${agent.id}/signing-keys`, {
        token: owner.token,
        body: { chain: 'ethereum', custody: 'client_tss' },
      });
      expect(r.status).toBe(201);
      return { agent, key: r.body };
    }

    it('creates a client_tss key (server share sealed, no address yet); one active key per family; passkey_owner stays 400', async () => {
      const { agent, key } = await tssAgent();
      expect(key).toMatchObject({
        custody: 'client_tss',
        address: null,
        public_key: null,
        key_version: 1,
        is_active: true,
      });
      const [row] = await sqlOn<{ vault_secret_id: string }>(
        mesh,
        'SELECT vault_secret_id FROM signer.signing_keys WHERE id = $1',
        [key['id']],
      );
      const sealed = await sqlOn(mesh, 'SELECT id FROM vault_crypto.secret_versions WHERE id = $1', [
        row!.vault_secret_id,
      ]);
      expect(sealed).toHaveLength(1);
      expectProblem(
        await call('POST', `/v1/agents/${agent.id}/signing-keys`, {
          token: owner.token,
          body: { chain: 'base' },
        }),
        409,
      );
      const other = await newAgent(owner);
      expectProblem(
        await call('POST', `/v1/agents/${other.id}/signing-keys`, {
          token: owner.token,
          body: { chain: 'ethereum', custody: 'passkey_owner' },
        }),
        400,
        { field: 'custody' },
      );
      expect(await keysOf(other.id)).toEqual([]);
      expect((await keysOf(agent.id)).map((k) => k['custody'])).toEqual(['client_tss']);
    });

    it('is not exported, imported over or rotated on the server path', async () => {
      const { agent, key } = await tssAgent();
      const ex = await call('POST', exportPath(agent.id), { token: owner.token, confirm: TEST_PASSWORD });
      expectProblem(ex, 409, { type: 'custody_not_exportable', field: 'chain' });
      expect(ex.body['private_key']).toBeUndefined();
      expect(await loadsFor(key['id'] as string, 'export')).toBe(0);
      expectProblem(
        await call('POST', importPath(agent.id), {
          token: owner.token,
          confirm: TEST_PASSWORD,
          body: { private_key: Wallet.createRandom().privateKey },
        }),
        409,
        { field: 'chain' },
      );
      expectProblem(
        await call('POST', `/v1/agents/${agent.id}/signing-keys/ethereum/rotate`, { token: owner.token }),
        400,
      );
      expect((await keysOf(agent.id)).map((k) => k['id'])).toEqual([key['id']]);
      const refused = await auditUntil(owner, 'signing_key.export.refused', (r) =>
        r.includes('custody_not_exportable'),
      );
      expect(
        refused.find((e) => (e['details'] as Body)['reason'] === 'custody_not_exportable'),
      ).toMatchObject({
        details: { status: 409, field: 'chain' },
      });
    });

    it('stores wraps as sent and returns them byte for byte; wraps_complete once both types exist; rewrap replaces one', async () => {
      const { agent, key } = await tssAgent();
      const keyId = key['id'] as string;
      const empty = await call('GET', sharePath(keyId), { token: owner.token });
      expect(empty.status).toBe(200);
      expect(empty.body).toMatchObject({
        key_id: keyId,
        agent_id: agent.id,
        wraps: [],
        wraps_complete: false,
      });

      const pBytes = randomBytes(77);
      const p = passkeyWrap(pBytes);
      const put1 = await call('PUT', sharePath(keyId), { token: owner.token, body: { wraps: [p] } });
      expect(put1.status).toBe(200);
      expect(put1.headers.get('cache-control')).toBe('no-store');
      expect(put1.body).toMatchObject({
        wraps_complete: false,
        wraps: [{ ...p, kdf: null, kdf_params: {} }],
      });

      const rBytes = randomBytes(48);
      const rw = recoveryWrap(rBytes);
      const put2 = await call('PUT', sharePath(keyId), { token: owner.token, body: { wraps: [rw] } });
      expect(put2.status).toBe(200);
      expect(put2.body['wraps_complete']).toBe(true);

      const got = await call('GET', sharePath(keyId), { token: owner.token });
      expect(got.status).toBe(200);
      const wraps = got.body['wraps'] as Body[];
      expect(wraps).toEqual([
        expect.objectContaining({ ...p, kdf: null, kdf_params: {} }),
        expect.objectContaining({ ...rw, credential_id: null }),
      ]);
      expect(Buffer.from(wraps[0]!['ciphertext'] as string, 'base64').equals(pBytes)).toBe(true);
      // What the database holds is exactly the bytes sent: nothing was opened or re-encrypted.
      const rows = await storedRows(keyId);
      expect(rows.map((r) => r.type)).toEqual(['passkey_prf', 'recovery_code']);
      expect(rows[0]!.ciphertext.equals(pBytes)).toBe(true);
      expect(rows[1]!.ciphertext.equals(rBytes)).toBe(true);

      // A stored type is not overwritten by a PUT (409 naming wraps); rewrap replaces it.
      expectProblem(
        await call('PUT', sharePath(keyId), { token: owner.token, body: { wraps: [passkeyWrap()] } }),
        409,
        {
          field: 'wraps',
        },
      );
      expect((await storedRows(keyId))[0]!.ciphertext.equals(pBytes)).toBe(true);
      const nBytes = randomBytes(64);
      const np = passkeyWrap(nBytes);
      const re = await call('POST', `${sharePath(keyId)}/rewrap`, { token: owner.token, body: { wrap: np } });
      expect(re.status).toBe(200);
      expect(re.body['wraps']).toEqual([
        expect.objectContaining({ ...np, kdf: null }),
        expect.objectContaining({ ciphertext: rw.ciphertext }),
      ]);
      expect((await storedRows(keyId))[0]!.ciphertext.equals(nBytes)).toBe(true);

      expect(await auditOf(owner, 'signing_key.client_share.stored', 2)).toEqual(
        expect.arrayContaining([expect.objectContaining({ resource_id: keyId })]),
      );
      const [rewrapped] = await auditOf(owner, 'signing_key.client_share.rewrapped');
      expect(rewrapped).toMatchObject({
        resource_id: keyId,
        details: { wrap: { type: 'passkey_prf', ciphertext_bytes: 64 } },
      });
      expect(JSON.stringify(rewrapped)).not.toContain(np.ciphertext);
    });

    it('refuses bad wraps (400 naming the field), other custody 409, another org 404, members and agents 403; nothing stored', async () => {
      const { agent, key } = await tssAgent();
      const keyId = key['id'] as string;
      const cases: Array<[unknown, string]> = [
        [{ wraps: [] }, 'wraps'],
        [{ wraps: [{ ...passkeyWrap(), ciphertext: 'not base64!' }] }, 'wraps[0].ciphertext'],
        [{ wraps: [passkeyWrap(randomBytes(8))] }, 'wraps[0].ciphertext'],
        [{ wraps: [passkeyWrap(randomBytes(5000))] }, 'wraps[0].ciphertext'],
        [{ wraps: [{ ...passkeyWrap(), credential_id: undefined }] }, 'wraps[0].credential_id'],
        [{ wraps: [{ ...recoveryWrap(), kdf: undefined, kdf_params: undefined }] }, 'wraps[0].kdf'],
        [{ wraps: [{ ...recoveryWrap(), credential_id: 'abc' }] }, 'wraps[0].credential_id'],
        [{ wraps: [passkeyWrap(), passkeyWrap()] }, 'wraps'],
        [{ wraps: [{ ...passkeyWrap(), type: 'sms' }] }, 'wraps[0].type'],
        [{ wraps: [{ ...passkeyWrap(), extra: 1 }] }, 'wraps[0]'],
      ];
      for (const [body, field] of cases) {
        const r = await call('PUT', sharePath(keyId), { token: owner.token, body });
        expectProblem(r, 400);
        expect(String(r.body['field'])).toMatch(new RegExp(`^${field.replace(/[[\].]/g, '\\$&')}`));
      }
      expectProblem(
        await call('PUT', sharePath('nope'), { token: owner.token, body: { wraps: [passkeyWrap()] } }),
        400,
        {
          field: 'key_id',
        },
      );
      // A rewrap of a type never stored is a 404.
      expectProblem(
        await call('POST', `${sharePath(keyId)}/rewrap`, {
          token: owner.token,
          body: { wrap: recoveryWrap() },
        }),
        404,
      );
      // A server key has no client share.
      const server = await agentWithKey(owner);
      expectProblem(
        await call('PUT', sharePath(server.key['id'] as string), {
          token: owner.token,
          body: { wraps: [passkeyWrap()] },
        }),
        409,
        { type: 'custody_mismatch', field: 'key_id' },
      );
      for (const [who, status] of [
        [stranger.token, 404],
        [agent.token, 403],
        [(await orgMember(owner, 'member')).token, 403],
      ] as const) {
        expectProblem(
          await call('PUT', sharePath(keyId), { token: who, body: { wraps: [passkeyWrap()] } }),
          status,
        );
        expectProblem(await call('GET', sharePath(keyId), { token: who }), status);
        expectProblem(
          await call('POST', `${sharePath(keyId)}/rewrap`, { token: who, body: { wrap: passkeyWrap() } }),
          status,
        );
      }
      expect(await storedRows(keyId)).toEqual([]);
      expect(await storedRows(server.key['id'] as string)).toEqual([]);
      // The records travel through the outbox: wait until this test's reasons have all arrived.
      const reasons = ['invalid_argument', 'custody_mismatch', 'permission_denied'];
      await auditUntil(owner, 'signing_key.client_share.store.refused', (r) =>
        reasons.every((w) => r.includes(w)),
      );
    });

    it('parallel PUTs of one wrap type store exactly one', async () => {
      const { key } = await tssAgent();
      const keyId = key['id'] as string;
      const results = await Promise.all(
        Array.from({ length: 6 }, () =>
          call('PUT', sharePath(keyId), { token: owner.token, body: { wraps: [recoveryWrap()] } }),
        ),
      );
      expect(results.filter((r) => r.status === 200)).toHaveLength(1);
      for (const r of results.filter((x) => x.status !== 200)) expectProblem(r, 409, { field: 'wraps' });
      const rows = await storedRows(keyId);
      expect(rows).toHaveLength(1);
      const winner = results.find((r) => r.status === 200)!;
      expect(rows[0]!.ciphertext.toString('base64')).toBe((winner.body['wraps'] as Body[])[0]!['ciphertext']);
    });

    it('a client_tss key made through the API is refused on the signing path (sign and transactions 403)', async () => {
      const created = await call('POST', '/v1/agents', {
        token: owner.token,
        body: {
          name: `tss-signer-${randomBytes(3).toString('hex')}`,
          intents_api_enabled: true,
          message_signing_enabled: true,
        },
      });
      expect(created.status).toBe(201);
      const id = (created.body['agent'] as { id: string }).id;
      const t = await api(mesh, 'POST', '/v1/auth/agent-token', {
        body: { agent_id: id, api_key: created.body['api_key'] },
      });
      expect(t.status).toBe(200);
      const token = t.body['access_token'] as string;
      const k = await call('POST', `/v1/agents/${id}/signing-keys`, {
        token: owner.token,
        body: { chain: 'anvil', custody: 'client_tss' },
      });
      expect(k.status).toBe(201);
      const signed = await call('POST', `/v1/agents/${id}/sign`, {
        token,
        body: { chain: 'anvil', intent_type: 'personal_sign', message: '0x68656c6c6f' },
      });
      expectProblem(signed, 403, { type: 'client_tss_refused' });
      expect(signed.body['signature']).toBeUndefined();
      const sent = await call('POST', `/v1/agents/${id}/transactions`, {
        token,
        body: { chain: 'anvil', to: Wallet.createRandom().address, value: '0x1' },
      });
      expectProblem(sent, 403, { type: 'client_tss_refused' });
      const txs = await sqlOn(mesh, 'SELECT id FROM signer.transactions WHERE agent_id = $1', [id]);
      expect(txs).toEqual([]);
    });

    it('an admin (not only the owner) manages shares and exports', async () => {
      const admin = await orgMember(owner, 'admin');
      const { key } = await tssAgent();
      const r = await call('PUT', sharePath(key['id'] as string), {
        token: admin.token,
        body: { wraps: [passkeyWrap()] },
      });
      expect(r.status).toBe(200);
      const { agent } = await agentWithKey(owner);
      const ex = await exportOnce(agent.id, { token: admin.token, confirm: TEST_PASSWORD });
      expect(ex.status).toBe(200);
    });
  });
});
