import fs from 'node:fs';
import path from 'node:path';
import { waitFor } from '@custos/service-kit/testing';
import { api, expectProblem, quickUser } from '../src/api';
import { type Mesh, startMesh } from '../src/mesh';

// Issue 20, custody geofencing: a private mesh whose signer geofences KP and IR with a GeoIP
// database made for tests (fixtures/geoip-country-test.mmdb: 175.45.176.0/22 KP, 5.160.0.0/16 IR,
// 8.8.8.0/24 US; written by services/signer/test/mmdb-writer.ts, whose unit test checks it),
// behind a "proxy" on loopback so X-Forwarded-For names the client. Creating a server-custody key
// from a geofenced region is 403 `custody_geofenced`, audited `custody.geofenced` with the region,
// and makes no key; other regions and client_tss pass.

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
