import { api, expectProblem, quickUser } from '../src/api';
import { startMesh, type Mesh } from '../src/mesh';

type User = Awaited<ReturnType<typeof quickUser>>;
type JsonSchema = { properties?: Record<string, JsonSchema>; format?: string; items?: JsonSchema };

// The HTTP contracts of the audit and webhook routes as the gateway declares them: what the
// OpenAPI document says is what the routes answer, and PATCH keeps "absent", null and a value apart.
describe('audit and webhook contracts', () => {
  let mesh: Mesh;
  let owner: User;
  let doc: { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };

  beforeAll(async () => {
    mesh = await startMesh({
      extraEnv: {
        EMAIL_VERIFICATION_REQUIRED: 'false',
        RATE_LIMIT_RPS: '5000',
        RATE_LIMIT_BURST: '5000',
        // Receivers on 127.0.0.2 over http, so no test depends on public DNS.
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOWED_CIDRS: '127.0.0.2/32',
      },
    });
    owner = await quickUser(mesh);
    doc = (await (await fetch(`${mesh.baseUrl}/v1/openapi.json`)).json()) as typeof doc;
  });
  afterAll(() => mesh?.stop());

  const responseSchema = (path: string, method: string, status: string): JsonSchema => {
    const r = doc.paths[path]![method]!.responses[status] as {
      content: Record<string, { schema: JsonSchema }>;
    };
    return r.content['application/json']!.schema;
  };
  const keysOf = (s: JsonSchema) => Object.keys(s.properties ?? {}).sort();

  it('verify names its scheme documentation as an absolute URI this server resolves', async () => {
    const r = await api(mesh, 'GET', '/v1/audit/verify', { token: owner.token });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(keysOf(responseSchema('/v1/audit/verify', 'get', '200')));
    const scheme = r.body['scheme'] as Record<string, string>;
    expect(keysOf(responseSchema('/v1/audit/verify', 'get', '200').properties!['scheme']!)).toEqual(
      Object.keys(scheme).sort(),
    );
    expect(
      responseSchema('/v1/audit/verify', 'get', '200').properties!['scheme']!.properties!['documentation']!
        .format,
    ).toBe('uri');
    const url = new URL(scheme['documentation']!);
    expect(url.href).toBe(scheme['documentation']);
    expect(url.origin).toBe(new URL(mesh.baseUrl).origin);
    // The fragment is a JSON pointer into the document at that address: the verify operation.
    const target = (await (await fetch(url.href.split('#')[0]!)).json()) as Record<string, unknown>;
    const pointed = url.hash
      .slice(2)
      .split('/')
      .map((t) => decodeURIComponent(t).replaceAll('~1', '/').replaceAll('~0', '~'))
      .reduce<unknown>((node, key) => (node as Record<string, unknown>)[key], target) as Record<
      string,
      unknown
    >;
    expect(pointed['operationId']).toBe('getV1AuditVerify');
    expect(String(pointed['summary'])).toMatch(/HMAC-SHA256/);
    expect(scheme['chain_structure']).toMatch(/prev_hash, org_id, actor_type, actor_id, action/);
    expect(r.body).toMatchObject({ chain_valid: true, broken_at_event_id: null, reason: null });
  });

  it('lists records with exactly the documented fields, and refuses a repeated filter by name', async () => {
    const hook = await api(mesh, 'POST', '/v1/webhooks', {
      token: owner.token,
      body: { url: 'http://127.0.0.2:9/audit', events: ['policy.created'] },
    });
    expect(hook.status).toBe(201);
    let events: Array<Record<string, unknown>> = [];
    for (let i = 0; i < 150 && events.length === 0; i++) {
      const r = await api(mesh, 'GET', '/v1/audit/events?action=webhook.created&unknown=ignored', {
        token: owner.token,
      });
      expect(r.status).toBe(200);
      events = r.body['events'] as typeof events;
      if (events.length === 0) await new Promise((res) => setTimeout(res, 200));
    }
    const itemSchema = responseSchema('/v1/audit/events', 'get', '200').properties!['events']!.items!;
    expect(Object.keys(events[0]!).sort()).toEqual(keysOf(itemSchema));
    expect(events[0]).toMatchObject({
      action: 'webhook.created',
      actor_id: owner.userId,
      resource_type: 'webhook',
      resource_id: hook.body['id'],
      details: { host: '127.0.0.2:9', events: ['policy.created'] },
    });
    expect(typeof events[0]!['sequence']).toBe('number');
    expectProblem(
      await api(mesh, 'GET', '/v1/audit/events?action=a.b&action=c.d', { token: owner.token }),
      400,
      { field: 'action' },
    );
  });

  it('PATCH keeps absent, null and a value apart', async () => {
    const created = await api(mesh, 'POST', '/v1/webhooks', {
      token: owner.token,
      body: { url: 'http://127.0.0.2:9/patch', events: ['policy.created'], description: 'first' },
    });
    expect(created.status).toBe(201);
    expect(Object.keys(created.body).sort()).toEqual(keysOf(responseSchema('/v1/webhooks', 'post', '201')));
    const id = created.body['id'] as string;
    const patch = async (body: Record<string, unknown>) => {
      const r = await api(mesh, 'PATCH', `/v1/webhooks/${id}`, { token: owner.token, body });
      expect(r.status).toBe(200);
      expect(Object.keys(r.body).sort()).toEqual(keysOf(responseSchema('/v1/webhooks/{id}', 'patch', '200')));
      return r.body;
    };
    // Absent: only is_active changes.
    expect(await patch({ is_active: false })).toMatchObject({
      is_active: false,
      description: 'first',
      events: ['policy.created'],
      url: 'http://127.0.0.2:9/patch',
    });
    expect(await patch({ description: 'second' })).toMatchObject({ description: 'second', is_active: false });
    // null clears, as an empty string does.
    expect(await patch({ description: null })).toMatchObject({ description: '', is_active: false });
    expect(await patch({ description: 'third', events: ['policy.deleted', 'policy.created'] })).toMatchObject(
      {
        description: 'third',
        events: ['policy.created', 'policy.deleted'],
      },
    );
    expect(await patch({ description: '' })).toMatchObject({ description: '' });
    for (const [body, field] of [
      [{ is_active: null }, 'is_active'],
      [{ events: null }, 'events'],
      [{ url: null }, 'url'],
      [{ events: [1] }, 'events[0]'],
    ] as const) {
      expectProblem(await api(mesh, 'PATCH', `/v1/webhooks/${id}`, { token: owner.token, body }), 400, {
        field,
      });
    }
    expectProblem(
      await api(mesh, 'GET', `/v1/webhooks/${id}/deliveries?status=bogus`, { token: owner.token }),
      400,
      { field: 'status' },
    );
    const listed = await api(mesh, 'GET', `/v1/webhooks/${id}/deliveries?limit=5&whatever=1`, {
      token: owner.token,
    });
    expect(listed.body).toEqual({ deliveries: [], count: 0 });
  });
});
