import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Interface } from 'ethers';
import { waitFor } from '@custos/service-kit/testing';
import { api, expectProblem, quickUser } from '../src/api';
import { ETH, anvilAgent, anvilOf, getApproval, randomAddress, submitTx } from '../src/approvals';
import { sqlOn } from '../src/db';
import { type Mesh, sharedMesh, startMesh } from '../src/mesh';

// Issue 20, custody geofencing: a private mesh whose signer geofences KP and IR with a GeoIP
// database made for tests (fixtures/geoip-country-test.mmdb: 175.45.176.0/22 KP, 5.160.0.0/16 IR,
// 8.8.8.0/24 US; written by services/signer/test/mmdb-writer.ts, whose unit test checks it),
// behind a "proxy" on loopback so X-Forwarded-For names the client. Creating a server-custody key
// from a geofenced region is 403 `custody_geofenced`, audited `custody.geofenced` with the region,
// and makes no key; other regions and client_tss pass.
//
// Sanctions screening: a private mesh (on the shared mesh's anvil) whose signer reads a list file
// written here (refreshed every 10 s): under `deny` a listed recipient — the transaction's `to` or
// an ERC-20 transfer's recipient — is 403 `sanctions_blocked` naming the list and audited
// `sanctions.blocked`; under `approve` it waits for a human (202); `off` screens nothing; a list
// published eight days ago pauses screened transfers (503 `sanctions_list_stale`).

type Body = Record<string, unknown>;
type User = Awaited<ReturnType<typeof quickUser>>;

const KP_IP = '175.45.178.9';
const IR_IP = '5.160.10.10';
const US_IP = '8.8.8.8';

describe('custody geofencing (private mesh, GeoIP)', () => {
  let mesh: Mesh;
  let owner: User;

  beforeAll(async () => {
    const db = path.join(__dirname, '../fixtures/geoip-country-test.mmdb');
    expect(fs.existsSync(db)).toBe(true);
    mesh = await startMesh({
      extraEnv: {
        TRUSTED_PROXIES: '127.0.0.1/32',
        EMAIL_VERIFICATION_REQUIRED: 'false',
        CUSTODY_GEOFENCED_REGIONS: 'KP,IR',
        CUSTODY_REGION_SOURCE: 'geoip',
        CUSTODY_GEOIP_DATABASE: db,
      },
    });
    owner = await quickUser(mesh);
  });
  afterAll(() => mesh?.stop());

  async function call(method: string, p: string, opts: { ip: string; body?: unknown }) {
    const res = await fetch(`${mesh.baseUrl}${p}`, {
      method,
      headers: {
        authorization: `Bearer ${owner.token}`,
        'x-forwarded-for': opts.ip,
        ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : {}) as Body };
  }

  async function newAgent(): Promise<string> {
    const r = await api(mesh, 'POST', '/v1/agents', {
      token: owner.token,
      body: { name: `geo-${Math.random().toString(36).slice(2, 8)}` },
    });
    expect(r.status).toBe(201);
    return (r.body['agent'] as { id: string }).id;
  }

  async function keysOf(agentId: string): Promise<Body[]> {
    const r = await api(mesh, 'GET', `/v1/agents/${agentId}/signing-keys`, { token: owner.token });
    expect(r.status).toBe(200);
    return r.body['keys'] as Body[];
  }

  async function geofencedRecords(n: number): Promise<Body[]> {
    return waitFor(
      async () => {
        const a = await api(mesh, 'GET', '/v1/audit/events?limit=100&action=custody.geofenced', {
          token: owner.token,
        });
        const list = (a.body['events'] as Body[] | undefined) ?? [];
        return list.length >= n ? list : undefined;
      },
      30000,
      200,
    ).catch(async (err: Error) => {
      const all = await api(mesh, 'GET', '/v1/audit/events?limit=20', { token: owner.token });
      const lines = [...(mesh.output.get('signer') ?? []), ...(mesh.output.get('audit') ?? [])]
        .filter((l) => /custody|error|warn/i.test(l))
        .slice(-10);
      throw new Error(`${err.message}: ${JSON.stringify(all.body)}\n${lines.join('\n')}`);
    });
  }

  it('a server key from a geofenced region is 403 custody_geofenced, audited with the region, and no key is made', async () => {
    const agentId = await newAgent();
    const kp = await call('POST', `/v1/agents/${agentId}/signing-keys`, {
      ip: KP_IP,
      body: { chain: 'ethereum' },
    });
    expectProblem(kp, 403, { type: 'custody_geofenced', region: 'KP' });
    // `server` is the default custody: asking for it by name is refused alike.
    const ir = await call('POST', `/v1/agents/${agentId}/signing-keys`, {
      ip: IR_IP,
      body: { chain: 'ethereum', custody: 'server' },
    });
    expectProblem(ir, 403, { type: 'custody_geofenced', region: 'IR' });
    expect(await keysOf(agentId)).toEqual([]);
    const records = await geofencedRecords(2);
    const mine = records.filter((r) => r['resource_id'] === agentId);
    expect(mine.map((r) => (r['details'] as Body)['region']).sort()).toEqual(['IR', 'KP']);
    for (const r of mine) {
      expect(r['details']).toMatchObject({ source: 'geoip', custody: 'server' });
      expect(r['actor_id']).toBe(owner.userId);
    }
    // The client's address is the record's own ip_address (as on every record), not a detail of it.
    const kpRecord = mine.find((r) => (r['details'] as Body)['region'] === 'KP')!;
    expect(kpRecord['ip_address']).toBe(KP_IP);
  });

  it('other regions make the server key; a client_tss key is not geofenced', async () => {
    const agentId = await newAgent();
    const us = await call('POST', `/v1/agents/${agentId}/signing-keys`, {
      ip: US_IP,
      body: { chain: 'ethereum' },
    });
    expect(us.status).toBe(201);
    expect(us.body['custody']).toBe('server');
    const other = await newAgent();
    const tss = await call('POST', `/v1/agents/${other}/signing-keys`, {
      ip: KP_IP,
      body: { chain: 'ethereum', custody: 'client_tss' },
    });
    expect(tss.status).toBe(201);
    expect(tss.body['custody']).toBe('client_tss');
  });
});

describe('sanctions screening (private mesh on the shared anvil)', () => {
  let mesh: Mesh;
  let dir: string;
  let listFile: string;
  let owner: User;
  const SANCTIONED = randomAddress();
  const SANCTIONED_TOKEN_RECIPIENT = randomAddress();
  const writeList = (publishedAt: Date) =>
    fs.writeFileSync(
      listFile,
      JSON.stringify({
        name: 'test-sdn',
        published_at: publishedAt.toISOString(),
        addresses: { ETH: [SANCTIONED.toLowerCase(), SANCTIONED_TOKEN_RECIPIENT] },
      }),
    );

  beforeAll(async () => {
    const shared = await sharedMesh();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-e2e-sanctions-'));
    listFile = path.join(dir, 'sdn.json');
    writeList(new Date());
    mesh = await startMesh({
      extraEnv: {
        EMAIL_VERIFICATION_REQUIRED: 'false',
        LOCAL_EVM_RPC_URL: shared.env['LOCAL_EVM_RPC_URL']!,
        SANCTIONS_LIST_FILE: listFile,
        SANCTIONS_REFRESH_SECONDS: '10',
      },
    });
    owner = await quickUser(mesh);
  });
  afterAll(async () => {
    await mesh?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  async function outbox(action: string, agentId: string): Promise<Body[]> {
    const rows = await sqlOn<{ payload: Body }>(
      mesh,
      `SELECT payload FROM signer.outbox WHERE name = 'audit.recorded'
         AND payload->>'action' = $1 AND payload->>'resource_id' = $2 ORDER BY seq`,
      [action, agentId],
    );
    return rows.map((r) => r.payload);
  }

  it('deny: a sanctioned recipient (any case) is 403 naming the list, audited, nothing made', async () => {
    const agent = await anvilAgent(mesh, owner, { address_screening_policy: { mode: 'deny' } });
    await anvilOf(mesh).send('anvil_setBalance', [agent.address, `0x${(10n * ETH).toString(16)}`]);
    const r = await submitTx(mesh, agent, { chain: 'anvil', to: SANCTIONED, value: '0.001' });
    expectProblem(r as never, 403, { type: 'sanctions_blocked', list: 'test-sdn' });
    const recs = await outbox('sanctions.blocked', agent.id);
    expect(recs.map((x) => x['metadata'])).toEqual([
      { list: 'test-sdn', chain: 'anvil', family: 'evm', address: SANCTIONED.toLowerCase() },
    ]);
    // An ERC-20 transfer to a listed recipient is screened on the calldata's recipient.
    const data = new Interface(['function transfer(address to, uint256 amount)']).encodeFunctionData(
      'transfer',
      [SANCTIONED_TOKEN_RECIPIENT, 1n],
    );
    const erc20 = await submitTx(mesh, agent, { chain: 'anvil', to: randomAddress(), value: '0', data });
    expectProblem(erc20 as never, 403, { type: 'sanctions_blocked', list: 'test-sdn' });
    const rows = await sqlOn<{ n: string }>(
      mesh,
      `SELECT count(*)::text AS n FROM signer.transactions WHERE agent_id = $1`,
      [agent.id],
    );
    expect(rows[0]!.n).toBe('0');
    // A clean recipient goes through.
    const ok = await submitTx(mesh, agent, { chain: 'anvil', to: randomAddress(), value: '0.001' });
    expect([200, 201]).toContain(ok.status);
  });

  it('approve: a sanctioned recipient is 202 awaiting approval', async () => {
    const agent = await anvilAgent(mesh, owner, { address_screening_policy: { mode: 'approve' } });
    const r = await submitTx(mesh, agent, { chain: 'anvil', to: SANCTIONED, value: '0.001' });
    expect(r.status).toBe(202);
    expect(r.body).toMatchObject({ status: 'awaiting_approval', approval_id: expect.any(String) });
    // The approver sees why: the deciding rule is the sanctions hit, with the list and address.
    const a = await getApproval(mesh, owner.token, r.body['approval_id'] as string);
    expect(a.status).toBe(200);
    expect(a.body['rule']).toMatchObject({
      reason: 'sanctions_hit',
      list: 'test-sdn',
      chain: 'anvil',
      address: SANCTIONED.toLowerCase(),
    });
  });

  it('sign intents are screened too: a sign-only transaction or a typed-data address to a listed party is 403, even under approve', async () => {
    const agent = await anvilAgent(mesh, owner, {
      address_screening_policy: { mode: 'approve' },
      message_signing_enabled: true,
      eip712_default_policy: 'allow',
    });
    await anvilOf(mesh).send('anvil_setBalance', [agent.address, `0x${(10n * ETH).toString(16)}`]);
    const sign = (body: Body) =>
      api(mesh, 'POST', `/v1/agents/${agent.id}/sign`, {
        token: agent.token,
        body: { chain: 'anvil', ...body },
      });
    expectProblem(await sign({ intent_type: 'transaction', to: SANCTIONED, value: '0.001' }), 403, {
      type: 'sanctions_blocked',
      list: 'test-sdn',
    });
    // A permit whose spender is written without 0x is still the listed address.
    const permit = (spender: string) => ({
      types: {
        EIP712Domain: [
          { name: 'name', type: 'string' },
          { name: 'chainId', type: 'uint256' },
        ],
        Permit: [
          { name: 'owner', type: 'address' },
          { name: 'spender', type: 'address' },
          { name: 'value', type: 'uint256' },
        ],
      },
      primaryType: 'Permit',
      domain: { name: 'Token', chainId: 31337 },
      message: { owner: agent.address, spender, value: '1' },
    });
    expectProblem(
      await sign({ intent_type: 'typed_data', typed_data: permit(SANCTIONED.slice(2).toLowerCase()) }),
      403,
      { type: 'sanctions_blocked' },
    );
    expect(
      (await outbox('sanctions.blocked', agent.id)).map((r) => (r['metadata'] as Body)['address']),
    ).toEqual([SANCTIONED.toLowerCase(), SANCTIONED.toLowerCase()]);
    // A clean spender is signed.
    expect((await sign({ intent_type: 'typed_data', typed_data: permit(randomAddress()) })).status).toBe(200);
  });

  it('off: no screening at all', async () => {
    const agent = await anvilAgent(mesh, owner, { address_screening_policy: { mode: 'off' } });
    await anvilOf(mesh).send('anvil_setBalance', [agent.address, `0x${(10n * ETH).toString(16)}`]);
    const r = await submitTx(mesh, agent, { chain: 'anvil', to: SANCTIONED, value: '0.001' });
    expect([200, 201]).toContain(r.status);
  });

  // Last: it leaves the mesh's list stale.
  it('a list published eight days ago pauses screened transfers with 503 naming the list', async () => {
    const agent = await anvilAgent(mesh, owner, { address_screening_policy: { mode: 'deny' } });
    writeList(new Date(Date.now() - 8 * 24 * 3600 * 1000));
    const r = await waitFor(
      async () => {
        const x = await submitTx(mesh, agent, { chain: 'anvil', to: SANCTIONED, value: '0.001' });
        return x.status === 503 ? x : undefined;
      },
      30000,
      500,
    );
    expectProblem(r as never, 503, { type: 'sanctions_list_stale', list: 'test-sdn' });
  });
});
