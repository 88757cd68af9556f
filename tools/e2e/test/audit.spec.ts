import { randomBytes } from 'node:crypto';
import { waitFor } from '@custos/service-kit/testing';
import { api, expectProblem, quickUser } from '../src/api';
import pg from 'pg';
import { sqlOn } from '../src/db';
import { startMesh, type Mesh } from '../src/mesh';

type User = Awaited<ReturnType<typeof quickUser>>;
type AuditEvent = Record<string, unknown> & { id: string; action: string; sequence: number };

describe('audit: fail-closed records, the per-org hash chain, query and verify', () => {
  let mesh: Mesh;
  let owner: User;
  let vaultId: string;

  beforeAll(async () => {
    mesh = await startMesh({
      extraEnv: {
        EMAIL_VERIFICATION_REQUIRED: 'false',
        RATE_LIMIT_RPS: '5000',
        RATE_LIMIT_BURST: '5000',
        // The tests stand in for a proxy on loopback, so X-Forwarded-For names the client.
        TRUSTED_PROXIES: '127.0.0.1/32',
      },
    });
    owner = await quickUser(mesh);
    vaultId = await newVault(owner);
  });
  afterAll(() => mesh?.stop());

  async function newVault(user: User): Promise<string> {
    const v = await api(mesh, 'POST', '/v1/vaults', {
      token: user.token,
      body: { name: `v-${randomBytes(3).toString('hex')}` },
    });
    expect(v.status).toBe(201);
    return v.body['id'] as string;
  }

  const put = (user: User, vault: string, path: string, body: Record<string, unknown>) =>
    api(mesh, 'PUT', `/v1/vaults/${vault}/secrets/${path}`, { token: user.token, body });

  async function read(user: User, vault: string, path: string, headers: Record<string, string> = {}) {
    const res = await fetch(`${mesh.baseUrl}/v1/vaults/${vault}/secrets/${path}`, {
      headers: { authorization: `Bearer ${user.token}`, ...headers },
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown>, headers: res.headers };
  }

  async function events(user: User, query = ''): Promise<AuditEvent[]> {
    const r = await api(mesh, 'GET', `/v1/audit/events?limit=1000${query}`, { token: user.token });
    expect(r.status).toBe(200);
    return r.body['events'] as AuditEvent[];
  }

  /** Waits until the org's log holds at least `n` records of `action`; returns them newest first. */
  async function eventually(user: User, action: string, n: number, timeoutMs = 30000): Promise<AuditEvent[]> {
    let last: AuditEvent[] = [];
    await waitFor(
      async () => {
        // The audit service may be restarting: anything but a 200 is "not yet".
        const r = await api(mesh, 'GET', `/v1/audit/events?limit=1000&action=${action}`, {
          token: user.token,
        });
        if (r.status !== 200) return false;
        last = r.body['events'] as AuditEvent[];
        return last.length >= n;
      },
      timeoutMs,
      200,
    ).catch(() => {
      throw new Error(`expected ${n} ${action} records, found ${last.length}`);
    });
    return last;
  }

  it('records a secret read with actor, resource, client address and request id, never the value', async () => {
    const value = `s3cr3t-${randomBytes(8).toString('hex')}`;
    const written = await put(owner, vaultId, 'app/db/password', { type: 'password', value });
    expect(written.status).toBe(201);
    const r = await read(owner, vaultId, 'app/db/password', {
      'x-request-id': 'audit-read-1',
      'x-forwarded-for': '198.51.100.23',
    });
    expect(r.status).toBe(200);
    const [rec] = await eventually(owner, 'secret.read', 1);
    expect(rec).toMatchObject({
      action: 'secret.read',
      org_id: owner.orgId,
      actor_type: 'user',
      actor_id: owner.userId,
      resource_type: 'secret',
      resource_id: written.body['id'],
      ip_address: '198.51.100.23',
      request_id: 'audit-read-1',
      details: { vault_id: vaultId, path: 'app/db/password', version: 1, type: 'password' },
      created_at: expect.any(String),
      integrity_hash: expect.stringMatching(/^[0-9a-f]{64}$/),
      prev_hash: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    const writes = await eventually(owner, 'secret.write', 1);
    expect(writes[0]).toMatchObject({ actor_id: owner.userId, details: { path: 'app/db/password' } });
    expect(await eventually(owner, 'vault.created', 1)).toHaveLength(1);
    // No record anywhere, nor any outbox row, carries the value.
    expect(JSON.stringify(await events(owner))).not.toContain(value);
    const outbox = await sqlOn(mesh, `SELECT payload::text AS p FROM vault_crypto.outbox`);
    expect(outbox.length).toBeGreaterThan(0);
    for (const row of outbox) expect(String(row['p'])).not.toContain(value);
  });

  it('lists newest first, filters by action, pages with limit and offset, and verifies', async () => {
    for (let i = 0; i < 3; i++) expect((await read(owner, vaultId, 'app/db/password')).status).toBe(200);
    await eventually(owner, 'secret.read', 4);
    const all = await events(owner);
    const seqs = all.map((e) => e.sequence);
    expect(seqs).toEqual([...seqs].sort((a, b) => b - a));
    expect(new Set(seqs).size).toBe(seqs.length);
    const page = await api(mesh, 'GET', '/v1/audit/events?action=secret.read&limit=2&offset=1', {
      token: owner.token,
    });
    expect(page.status).toBe(200);
    expect(page.body['count']).toBe(4);
    expect((page.body['events'] as AuditEvent[]).map((e) => e.sequence)).toEqual(
      all
        .filter((e) => e.action === 'secret.read')
        .map((e) => e.sequence)
        .slice(1, 3),
    );
    const verify = await api(mesh, 'GET', '/v1/audit/verify', { token: owner.token });
    expect(verify.status).toBe(200);
    expect(verify.body).toMatchObject({
      chain_valid: true,
      events_checked: all.length,
      events_verified: all.length,
      broken_at_event_id: null,
      scheme: { algorithm: 'HMAC-SHA256', hash_field: 'integrity_hash', link_field: 'prev_hash' },
    });
  });

  it('refuses members, agents, anonymous callers and bad parameters, naming the field', async () => {
    const email = `m-${randomBytes(4).toString('hex')}@example.com`;
    expect(
      (await api(mesh, 'POST', '/v1/org/invite', { token: owner.token, body: { email, role: 'member' } }))
        .status,
    ).toBeLessThan(300);
    const agent = await api(mesh, 'POST', '/v1/agents', { token: owner.token, body: { name: 'auditbot' } });
    expect(agent.status).toBe(201);
    const t = await api(mesh, 'POST', '/v1/auth/agent-token', {
      body: { agent_id: (agent.body['agent'] as { id: string }).id, api_key: agent.body['api_key'] },
    });
    const agentToken = t.body['access_token'] as string;
    for (const path of ['/v1/audit/events', '/v1/audit/verify']) {
      expectProblem(await api(mesh, 'GET', path, { token: agentToken }), 403);
      expectProblem(await api(mesh, 'GET', path), 401);
    }
    expectProblem(await api(mesh, 'GET', '/v1/audit/events?limit=0', { token: owner.token }), 400, {
      field: 'limit',
    });
    expectProblem(await api(mesh, 'GET', '/v1/audit/events?limit=1001', { token: owner.token }), 400, {
      field: 'limit',
    });
    expectProblem(await api(mesh, 'GET', '/v1/audit/events?offset=-1', { token: owner.token }), 400, {
      field: 'offset',
    });
    expectProblem(await api(mesh, 'GET', "/v1/audit/events?action=x'--", { token: owner.token }), 400, {
      field: 'action',
    });
    // Another org sees none of this org's records.
    const stranger = await quickUser(mesh);
    expect((await events(stranger)).filter((e) => e['org_id'] === owner.orgId)).toEqual([]);
  });

  describe('fail-closed: when vault-crypto cannot store the audit record', () => {
    const refuse = () =>
      sqlOn(
        mesh,
        `CREATE OR REPLACE FUNCTION vault_crypto.e2e_refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN IF NEW.name = 'audit.recorded' THEN RAISE EXCEPTION 'outbox refuses audit records'; END IF;
         RETURN NEW; END $$;
         CREATE TRIGGER e2e_refuse_audit BEFORE INSERT ON vault_crypto.outbox
           FOR EACH ROW EXECUTE FUNCTION vault_crypto.e2e_refuse_audit();`,
      );
    const allow = () => sqlOn(mesh, `DROP TRIGGER IF EXISTS e2e_refuse_audit ON vault_crypto.outbox`);
    afterEach(allow);

    it('refuses reads (no value, no read counted) and writes (no version stored)', async () => {
      const value = `limited-${randomBytes(6).toString('hex')}`;
      expect(
        (await put(owner, vaultId, 'fc/token', { type: 'api_key', value, max_access_count: 2 })).status,
      ).toBe(201);
      const open = `unlimited-${randomBytes(6).toString('hex')}`;
      expect((await put(owner, vaultId, 'fc/open', { type: 'api_key', value: open })).status).toBe(201);
      await refuse();
      // A read with no limit commits its record alone (group commit): refused just the same.
      const unlimited = await read(owner, vaultId, 'fc/open');
      expect(unlimited.status).toBe(503);
      expect(JSON.stringify(unlimited.body)).not.toContain(open);
      for (let i = 0; i < 3; i++) {
        const r = await read(owner, vaultId, 'fc/token');
        expect(r.status).toBe(503);
        expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
        expect(JSON.stringify(r.body)).not.toContain(value);
        expect(JSON.stringify(r.body)).not.toMatch(/outbox|trigger|SQL/i);
      }
      const count = await sqlOn(
        mesh,
        `SELECT access_count::int AS access_count FROM vault_crypto.secret_versions WHERE vault_id = $1 AND path = 'fc/token'`,
        [vaultId],
      );
      expect(count).toEqual([{ access_count: 0 }]);
      const w = await put(owner, vaultId, 'fc/token', { type: 'api_key', value: 'v2' });
      expectProblem(w, 503);
      expect(
        await sqlOn(
          mesh,
          `SELECT version FROM vault_crypto.secret_versions WHERE vault_id = $1 AND path = 'fc/token'`,
          [vaultId],
        ),
      ).toEqual([{ version: 1 }]);
      expectProblem(
        await api(mesh, 'DELETE', `/v1/vaults/${vaultId}/secrets/fc/token`, { token: owner.token }),
        503,
      );

      await allow();
      // Both reads the limit allows are still there: the refused ones cost nothing.
      for (let i = 0; i < 2; i++) {
        const r = await read(owner, vaultId, 'fc/token');
        expect(r.status).toBe(200);
        expect(r.body['value']).toBe(value);
      }
      expectProblem(
        await api(mesh, 'GET', `/v1/vaults/${vaultId}/secrets/fc/token`, { token: owner.token }),
        410,
      );
    });
  });

  it('chains exactly one record for each of 100 parallel reads (group commits lose and double nothing)', async () => {
    const user = await quickUser(mesh);
    const vault = await newVault(user);
    expect((await put(user, vault, 'par/key', { type: 'password', value: 'pw-parallel' })).status).toBe(201);
    const ids = Array.from({ length: 100 }, (_, i) => `par-${String(i).padStart(3, '0')}`);
    const replies = await Promise.all(ids.map((id) => read(user, vault, 'par/key', { 'x-request-id': id })));
    expect(replies.map((r) => r.status)).toEqual(ids.map(() => 200));
    await eventually(user, 'secret.read', 100);
    // A second look after a pause: a duplicate arriving late would show here.
    await new Promise((r) => setTimeout(r, 1000));
    const all = await eventually(user, 'secret.read', 100);
    expect(all).toHaveLength(100);
    expect(all.map((e) => e['request_id']).sort()).toEqual(ids);
    const seqs = all.map((e) => e.sequence);
    expect(new Set(seqs).size).toBe(100);
    const verify = await api(mesh, 'GET', '/v1/audit/verify', { token: user.token });
    expect(verify.status).toBe(200);
    expect(verify.body).toMatchObject({ chain_valid: true, broken_at_event_id: null });
  });

  it('keeps every record, once and in chain order, while the audit service is down', async () => {
    const user = await quickUser(mesh);
    const vault = await newVault(user);
    expect((await put(user, vault, 'outage/key', { type: 'password', value: 'pw-outage' })).status).toBe(201);
    await eventually(user, 'secret.write', 1);
    // Let the sign-up's own records (from identity) land first, so only the reads arrive later.
    let seen = (await events(user)).length;
    for (;;) {
      await new Promise((r) => setTimeout(r, 750));
      const now = (await events(user)).length;
      if (now === seen) break;
      seen = now;
    }

    await mesh.kill('audit');
    const requestIds: string[] = [];
    for (let i = 0; i < 25; i++) {
      const id = `outage-${String(i).padStart(2, '0')}`;
      requestIds.push(id);
      expect((await read(user, vault, 'outage/key', { 'x-request-id': id })).status).toBe(200);
    }
    mesh.restart('audit');
    const reads = await eventually(user, 'secret.read', 25, 60000);
    expect(reads).toHaveLength(25);
    // Oldest first, the records are in the order the reads happened, at consecutive positions.
    const chronological = [...reads].reverse();
    expect(chronological.map((e) => e['request_id'])).toEqual(requestIds);
    const seqs = chronological.map((e) => e.sequence);
    expect(seqs).toEqual(seqs.map((_, i) => seqs[0]! + i));
    const all = await events(user);
    expect(new Set(all.map((e) => e.id)).size).toBe(all.length);
    const verify = await api(mesh, 'GET', '/v1/audit/verify', { token: user.token });
    expect(verify.body).toMatchObject({ chain_valid: true, events_checked: all.length });
  });

  describe('tampering with stored records is found by verify, naming the first broken record', () => {
    async function chainOf(n: number): Promise<{ user: User; ids: string[] }> {
      const user = await quickUser(mesh);
      const vault = await newVault(user);
      expect((await put(user, vault, 't/key', { type: 'password', value: 'tamper-me' })).status).toBe(201);
      for (let i = 0; i < n; i++) expect((await read(user, vault, 't/key')).status).toBe(200);
      await eventually(user, 'secret.read', n);
      // Records of other services (sign-up, the vault) may still be arriving: wait for a quiet chain.
      let all = await events(user);
      for (;;) {
        await new Promise((r) => setTimeout(r, 750));
        const again = await events(user);
        if (again.length === all.length) break;
        all = again;
      }
      return { user, ids: [...all].reverse().map((e) => e.id) };
    }
    // What someone with direct database access could do: skip the append-only trigger.
    async function tamper(statement: string, params: unknown[]): Promise<void> {
      const client = new pg.Client({ connectionString: mesh.env['DATABASE_URL'] });
      await client.connect();
      try {
        await client.query('SET session_replication_role = replica');
        await client.query(statement, params);
      } finally {
        await client.end();
      }
    }
    const verify = async (user: User) =>
      (await api(mesh, 'GET', '/v1/audit/verify', { token: user.token })).body;

    it('an edited record', async () => {
      const { user, ids } = await chainOf(4);
      await tamper(`UPDATE audit.events SET actor_id = 'someone-else' WHERE id = $1`, [ids[3]]);
      expect(await verify(user)).toMatchObject({
        chain_valid: false,
        broken_at_event_id: ids[3],
        reason: 'hmac_mismatch',
      });
    });

    it('a deleted record', async () => {
      const { user, ids } = await chainOf(4);
      await tamper(`DELETE FROM audit.events WHERE id = $1`, [ids[2]]);
      expect(await verify(user)).toMatchObject({ chain_valid: false, broken_at_event_id: ids[3] });
    });

    it('two records swapped', async () => {
      const { user, ids } = await chainOf(4);
      const rows = await sqlOn<{ id: string; seq: string }>(
        mesh,
        `SELECT id, seq FROM audit.events WHERE id = ANY($1)`,
        [[ids[1], ids[4]]],
      );
      const seqOf = (id: string) => rows.find((r) => r.id === id)!.seq;
      await tamper(`UPDATE audit.events SET seq = -seq WHERE id = $1`, [ids[1]]);
      await tamper(`UPDATE audit.events SET seq = $2 WHERE id = $1`, [ids[4], seqOf(ids[1]!)]);
      await tamper(`UPDATE audit.events SET seq = $2 WHERE id = $1`, [ids[1], seqOf(ids[4]!)]);
      expect(await verify(user)).toMatchObject({ chain_valid: false, broken_at_event_id: ids[4] });
    });

    it('the newest records removed', async () => {
      const { user, ids } = await chainOf(3);
      await tamper(`DELETE FROM audit.events WHERE id = ANY($1)`, [[ids.at(-1), ids.at(-2)]]);
      expect(await verify(user)).toMatchObject({
        chain_valid: false,
        broken_at_event_id: ids.at(-3),
        reason: 'head_mismatch',
      });
    });

    it('the service itself cannot change records (append-only trigger)', async () => {
      const { ids } = await chainOf(1);
      await expect(sqlOn(mesh, `DELETE FROM audit.events WHERE id = $1`, [ids[0]])).rejects.toThrow(
        /append-only/,
      );
    });
  });
});
