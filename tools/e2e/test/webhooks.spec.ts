import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { waitFor } from '@custos/service-kit/testing';
import { api, expectProblem, quickUser } from '../src/api';
import { sqlOn } from '../src/db';
import { startDnsServer } from '../src/dns-server';
import { startMesh, type Mesh } from '../src/mesh';

type User = Awaited<ReturnType<typeof quickUser>>;

/** One request a test HTTP server received, with the body bytes exactly as they arrived. */
interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
  at: number;
}

/** An HTTP server that records every request and answers through `answer`. */
async function recorder(
  host: string,
  answer: (req: http.IncomingMessage, res: http.ServerResponse, seen: Received[]) => void,
) {
  const seen: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ path: req.url ?? '', headers: req.headers, raw: Buffer.concat(chunks), at: Date.now() });
      answer(req, res, seen);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    seen,
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('webhooks: management, signed delivery, retries, restarts and SSRF refusals', () => {
  let mesh: Mesh;
  let owner: User;
  let dns: Awaited<ReturnType<typeof startDnsServer>>;
  // The receiver lives on 127.0.0.2, the one loopback address the operator setting allows.
  let receiver: Awaited<ReturnType<typeof recorder>>;
  // The canary listens on every local address; no refused URL may ever reach it.
  let canary: Awaited<ReturnType<typeof recorder>>;
  const flakyFailures = new Map<string, number>();

  beforeAll(async () => {
    dns = await startDnsServer();
    canary = await recorder('::', (_req, res) => res.writeHead(200).end('canary'));
    receiver = await recorder('127.0.0.2', (req, res, seen) => {
      const path = req.url ?? '';
      if (path.startsWith('/flaky/')) {
        const fails = seen.filter((s) => s.path === path).length <= (flakyFailures.get(path) ?? 0);
        res.writeHead(fails ? 500 : 204).end();
      } else if (path === '/redirect') {
        res.writeHead(302, { location: `http://127.0.0.1:${canary.port}/redirected` }).end();
      } else if (path.startsWith('/slow')) {
        setTimeout(() => res.writeHead(200).end('ok'), 40);
      } else {
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      }
    });
    // Names the tests resolve through their own DNS server.
    dns.records.set('hooks.example.test', ['127.0.0.2']);
    mesh = await startMesh({
      extraEnv: {
        EMAIL_VERIFICATION_REQUIRED: 'false',
        RATE_LIMIT_RPS: '5000',
        RATE_LIMIT_BURST: '5000',
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOWED_CIDRS: '127.0.0.2/32',
        WEBHOOK_DNS_SERVERS: `127.0.0.1:${dns.port}`,
        WEBHOOK_WORKER_INTERVAL_MS: '40',
        WEBHOOK_RETRY_BASE_MS: '60',
        WEBHOOK_TIMEOUT_MS: '1000',
        WEBHOOK_CONCURRENCY: '4',
      },
    });
    owner = await quickUser(mesh);
  });
  afterAll(async () => {
    await mesh?.stop();
    await receiver?.close();
    await canary?.close();
    await dns?.close();
  });

  const receiverUrl = (path: string) => `http://127.0.0.2:${receiver.port}${path}`;

  async function createHook(body: Record<string, unknown>, user: User = owner) {
    const r = await api(mesh, 'POST', '/v1/webhooks', { token: user.token, body });
    expect({ status: r.status, body: r.body }).toMatchObject({ status: 201 });
    return { id: r.body['id'] as string, secret: r.body['secret'] as string };
  }

  async function newVault(user: User = owner): Promise<string> {
    const r = await api(mesh, 'POST', '/v1/vaults', {
      token: user.token,
      body: { name: `v-${randomBytes(3).toString('hex')}` },
    });
    expect(r.status).toBe(201);
    return r.body['id'] as string;
  }

  /** Creates a grant on `vaultId` (a `policy.created` event) and returns its id. */
  async function newPolicy(vaultId: string, user: User = owner): Promise<string> {
    const r = await api(mesh, 'POST', `/v1/vaults/${vaultId}/policies`, {
      token: user.token,
      body: {
        secret_path_pattern: `p${randomBytes(3).toString('hex')}/**`,
        principal_type: 'user',
        principal_id: user.userId,
        permissions: ['read'],
      },
    });
    expect(r.status).toBe(201);
    return r.body['id'] as string;
  }

  const bodiesAt = (path: string) =>
    receiver.seen
      .filter((s) => s.path === path)
      .map((s) => JSON.parse(s.raw.toString('utf8')) as Record<string, unknown>);

  async function deliveries(hookId: string, user: User = owner) {
    const r = await api(mesh, 'GET', `/v1/webhooks/${hookId}/deliveries`, { token: user.token });
    expect(r.status).toBe(200);
    return r.body['deliveries'] as Array<{
      event_id: string;
      event_type: string;
      status: string;
      attempt_count: number;
      attempts: Array<{
        attempt: number;
        status_code: number | null;
        error: string | null;
        attempted_at: string;
      }>;
    }>;
  }

  describe('managing webhooks', () => {
    it('returns the secret once at creation and never again; lists, reads, patches and deletes', async () => {
      const created = await api(mesh, 'POST', '/v1/webhooks', {
        token: owner.token,
        body: {
          url: receiverUrl('/crud'),
          events: ['policy.deleted', 'policy.created', 'policy.created'],
          description: 'ops',
        },
      });
      expect(created.status).toBe(201);
      expect(created.headers.get('cache-control')).toBe('no-store');
      expect(created.body).toEqual({
        id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        org_id: owner.orgId,
        url: receiverUrl('/crud'),
        events: ['policy.created', 'policy.deleted'],
        description: 'ops',
        is_active: true,
        created_by: owner.userId,
        created_at: expect.any(String),
        updated_at: expect.any(String),
        secret: expect.stringMatching(/^whsec_[0-9a-f]{64}$/),
      });
      const id = created.body['id'] as string;
      const secret = created.body['secret'] as string;

      const got = await api(mesh, 'GET', `/v1/webhooks/${id}`, { token: owner.token });
      expect(got.status).toBe(200);
      expect(got.body['secret']).toBeUndefined();
      const list = await api(mesh, 'GET', '/v1/webhooks', { token: owner.token });
      expect((list.body['webhooks'] as Array<{ id: string }>).map((w) => w.id)).toContain(id);
      expect(JSON.stringify(list.body)).not.toContain(secret);
      // Not in clear in the database either.
      const rows = await sqlOn(mesh, `SELECT * FROM webhook_dispatcher.webhooks WHERE id = $1`, [id]);
      expect(JSON.stringify(rows)).not.toContain(secret.slice(6));

      const patched = await api(mesh, 'PATCH', `/v1/webhooks/${id}`, {
        token: owner.token,
        body: { is_active: false, events: ['approval.created'], description: 'paused' },
      });
      expect(patched.status).toBe(200);
      expect(patched.body).toMatchObject({
        is_active: false,
        events: ['approval.created'],
        description: 'paused',
      });
      expect(patched.body['secret']).toBeUndefined();

      const del = await api(mesh, 'DELETE', `/v1/webhooks/${id}`, { token: owner.token });
      expect(del.status).toBe(204);
      expectProblem(await api(mesh, 'GET', `/v1/webhooks/${id}`, { token: owner.token }), 404);
      expectProblem(await api(mesh, 'DELETE', `/v1/webhooks/${id}`, { token: owner.token }), 404);

      // Each change is in the audit log, naming the host but never the secret.
      let records: Array<{ action: string; resource_id: string; details: unknown }> = [];
      await waitFor(async () => {
        const a = await api(mesh, 'GET', '/v1/audit/events?limit=1000', { token: owner.token });
        records = (a.body['events'] as typeof records).filter((e) => e.resource_id === id);
        return records.length >= 3;
      }, 15000);
      expect(records.map((e) => e.action).sort()).toEqual([
        'webhook.created',
        'webhook.deleted',
        'webhook.updated',
      ]);
      expect(JSON.stringify(records)).not.toContain(secret);
      expect(JSON.stringify(records)).toContain(`127.0.0.2:${receiver.port}`);
    });

    it('refuses bad bodies with 400 naming the field, and changes nothing', async () => {
      const before = await sqlOn(mesh, `SELECT count(*)::int AS n FROM webhook_dispatcher.webhooks`);
      const cases: Array<[Record<string, unknown>, string, RegExp?]> = [
        [{ events: ['policy.created'] }, 'url'],
        [{ url: receiverUrl('/x') }, 'events'],
        [{ url: receiverUrl('/x'), events: [] }, 'events'],
        [{ url: receiverUrl('/x'), events: 'policy.created' }, 'events'],
        [{ url: receiverUrl('/x'), events: ['policy.created', 'secret.read'] }, 'events', /secret\.read/],
        [{ url: receiverUrl('/x'), events: ['policy.nope'] }, 'events', /policy\.nope/],
        [{ url: receiverUrl('/x'), events: ['policy.created'], description: 5 }, 'description'],
        [{ url: receiverUrl('/x'), events: ['policy.created'], secret: 'mine' }, 'secret'],
        [{ url: 'not a url', events: ['policy.created'] }, 'url'],
      ];
      for (const [body, field, detail] of cases) {
        const r = await api(mesh, 'POST', '/v1/webhooks', { token: owner.token, body });
        expectProblem(r, 400, { field });
        if (detail) expect(r.body['detail']).toMatch(detail);
      }
      const { id } = await createHook({ url: receiverUrl('/x'), events: ['policy.created'] });
      for (const [body, field] of [
        [{ events: ['nope.nope'] }, 'events'],
        [{ is_active: 'yes' }, 'is_active'],
        [{ url: 'http://127.0.0.1/' }, 'url'],
        [{ org_id: owner.orgId }, 'org_id'],
        [{}, 'body'],
      ] as const) {
        expectProblem(await api(mesh, 'PATCH', `/v1/webhooks/${id}`, { token: owner.token, body }), 400, {
          field,
        });
      }
      const after = await sqlOn(mesh, `SELECT count(*)::int AS n FROM webhook_dispatcher.webhooks`);
      expect(after[0]!['n']).toBe((before[0]!['n'] as number) + 1);
      const stored = await api(mesh, 'GET', `/v1/webhooks/${id}`, { token: owner.token });
      expect(stored.body).toMatchObject({
        url: receiverUrl('/x'),
        events: ['policy.created'],
        is_active: true,
      });
    });

    it('is for humans: agents get 403, other orgs 404, no token 401', async () => {
      const created = await api(mesh, 'POST', '/v1/agents', {
        token: owner.token,
        body: { name: `bot-${randomBytes(3).toString('hex')}` },
      });
      const agentId = (created.body['agent'] as { id: string }).id;
      const t = await api(mesh, 'POST', '/v1/auth/agent-token', {
        body: { agent_id: agentId, api_key: created.body['api_key'] },
      });
      const agentToken = t.body['access_token'] as string;
      const { id } = await createHook({ url: receiverUrl('/x'), events: ['policy.created'] });
      const body = { url: receiverUrl('/agent'), events: ['policy.created'] };
      expectProblem(await api(mesh, 'POST', '/v1/webhooks', { token: agentToken, body }), 403);
      expectProblem(await api(mesh, 'GET', '/v1/webhooks', { token: agentToken }), 403);
      expectProblem(await api(mesh, 'GET', `/v1/webhooks/${id}`, { token: agentToken }), 403);
      expectProblem(
        await api(mesh, 'PATCH', `/v1/webhooks/${id}`, { token: agentToken, body: { is_active: false } }),
        403,
      );
      expectProblem(await api(mesh, 'DELETE', `/v1/webhooks/${id}`, { token: agentToken }), 403);
      expectProblem(await api(mesh, 'GET', `/v1/webhooks/${id}/deliveries`, { token: agentToken }), 403);
      expectProblem(await api(mesh, 'POST', '/v1/webhooks', { body }), 401);

      const stranger = await quickUser(mesh);
      expectProblem(await api(mesh, 'GET', `/v1/webhooks/${id}`, { token: stranger.token }), 404);
      expectProblem(await api(mesh, 'DELETE', `/v1/webhooks/${id}`, { token: stranger.token }), 404);
      expectProblem(await api(mesh, 'GET', `/v1/webhooks/${id}/deliveries`, { token: stranger.token }), 404);
      const still = await api(mesh, 'GET', `/v1/webhooks/${id}`, { token: owner.token });
      expect(still.body['is_active']).toBe(true);
      const agentHooks = await sqlOn(mesh, `SELECT 1 FROM webhook_dispatcher.webhooks WHERE url = $1`, [
        receiverUrl('/agent'),
      ]);
      expect(agentHooks).toHaveLength(0);
    });
  });

  describe('delivery', () => {
    it('signs the exact raw body with the secret and sends id, event and timestamp headers', async () => {
      const user = await quickUser(mesh);
      const { id: hookId, secret } = await createHook(
        {
          url: `http://hooks.example.test:${receiver.port}/signed`,
          events: ['policy.created', 'policy.updated', 'policy.deleted'],
        },
        user,
      );
      const vaultId = await newVault(user);
      const policyId = await newPolicy(vaultId, user);
      const put = await api(mesh, 'PUT', `/v1/vaults/${vaultId}/policies/${policyId}`, {
        token: user.token,
        body: { permissions: ['read', 'write'] },
      });
      expect(put.status).toBe(200);
      const del = await api(mesh, 'DELETE', `/v1/vaults/${vaultId}/policies/${policyId}`, {
        token: user.token,
      });
      expect(del.status).toBe(204);

      await waitFor(async () => bodiesAt('/signed').length >= 3, 20000);
      const got = receiver.seen.filter((s) => s.path === '/signed');
      expect(got.map((s) => s.headers['x-webhook-event']).sort()).toEqual([
        'policy.created',
        'policy.deleted',
        'policy.updated',
      ]);
      for (const s of got) {
        // The signature is over the bytes as they arrived, keyed with the secret.
        const expected = createHmac('sha256', secret).update(s.raw).digest('hex');
        const sig = String(s.headers['x-webhook-signature']);
        expect(sig).toMatch(/^[0-9a-f]{64}$/);
        expect(timingSafeEqual(Buffer.from(sig, 'hex'), Buffer.from(expected, 'hex'))).toBe(true);
        // A signature under another secret does not match.
        expect(createHmac('sha256', `${secret}x`).update(s.raw).digest('hex')).not.toBe(sig);
        const body = JSON.parse(s.raw.toString('utf8')) as Record<string, unknown>;
        expect(Object.keys(body).sort()).toEqual(['created_at', 'data', 'id', 'org_id', 'type']);
        expect(body).toMatchObject({
          id: s.headers['x-webhook-id'],
          type: s.headers['x-webhook-event'],
          org_id: user.orgId,
        });
        expect((body['data'] as Record<string, unknown>)['policy_id']).toBe(policyId);
        expect(Number(s.headers['x-webhook-timestamp'])).toBeGreaterThan(Date.now() / 1000 - 60);
        expect(s.headers['content-type']).toBe('application/json');
        expect(s.headers['host']).toBe(`hooks.example.test:${receiver.port}`);
      }
      // The worker records an attempt after the receiver has answered: wait for the records.
      await waitFor(async () => (await deliveries(hookId, user)).every((d) => d.status !== 'pending'), 20000);
      const history = await deliveries(hookId, user);
      expect(history).toHaveLength(3);
      for (const d of history) {
        expect(d).toMatchObject({ status: 'succeeded', attempt_count: 1 });
        expect(d.attempts).toEqual([expect.objectContaining({ attempt: 1, status_code: 200, error: null })]);
      }
    });

    it('only delivers events the webhook subscribes to, of its own org, while it is active', async () => {
      const user = await quickUser(mesh);
      const other = await quickUser(mesh);
      const { id: createdOnly } = await createHook(
        { url: receiverUrl('/created-only'), events: ['policy.created'] },
        user,
      );
      const { id: paused } = await createHook(
        { url: receiverUrl('/paused'), events: ['policy.created'] },
        user,
      );
      await api(mesh, 'PATCH', `/v1/webhooks/${paused}`, { token: user.token, body: { is_active: false } });
      await createHook(
        { url: receiverUrl('/other-org'), events: ['policy.created', 'policy.deleted'] },
        other,
      );
      const vaultId = await newVault(user);
      const policyId = await newPolicy(vaultId, user);
      await api(mesh, 'DELETE', `/v1/vaults/${vaultId}/policies/${policyId}`, { token: user.token });
      // A later event of the other org: once it has arrived, the first org's events have been consumed.
      const otherPolicy = await newPolicy(await newVault(other), other);
      await waitFor(
        async () => bodiesAt('/other-org').length >= 1 && bodiesAt('/created-only').length >= 1,
        20000,
      );
      await new Promise((r) => setTimeout(r, 500));
      expect(bodiesAt('/created-only').map((b) => b['type'])).toEqual(['policy.created']);
      expect(bodiesAt('/paused')).toHaveLength(0);
      expect(bodiesAt('/other-org').map((b) => (b['data'] as Record<string, unknown>)['policy_id'])).toEqual([
        otherPolicy,
      ]);
      expect(await deliveries(createdOnly, user)).toHaveLength(1);
      expect(await deliveries(paused, user)).toHaveLength(0);
    });

    it('retries a failing receiver with growing gaps: four failures then success is five attempts, all in the history', async () => {
      const user = await quickUser(mesh);
      const path = `/flaky/${randomBytes(3).toString('hex')}`;
      flakyFailures.set(path, 4);
      const { id: hookId } = await createHook({ url: receiverUrl(path), events: ['policy.created'] }, user);
      await newPolicy(await newVault(user), user);
      await waitFor(async () => (await deliveries(hookId, user))[0]?.status === 'succeeded', 30000, 200);
      const seen = receiver.seen.filter((s) => s.path === path);
      expect(seen).toHaveLength(5);
      expect(new Set(seen.map((s) => s.headers['x-webhook-id'])).size).toBe(1);
      expect(new Set(seen.map((s) => s.raw.toString('hex'))).size).toBe(1);
      const gaps = seen.slice(1).map((s, i) => s.at - seen[i]!.at);
      // base 60 ms × 4^(n-1), at least 80 % of it (the jitter), and each wait longer than the last.
      gaps.forEach((g, i) => expect(g).toBeGreaterThanOrEqual(0.8 * 60 * 4 ** i));
      for (let i = 1; i < gaps.length; i++) expect(gaps[i]!).toBeGreaterThan(gaps[i - 1]!);
      const [d] = await deliveries(hookId, user);
      expect(d).toMatchObject({ status: 'succeeded', attempt_count: 5 });
      expect(d!.attempts.map((a) => [a.attempt, a.status_code])).toEqual([
        [1, 500],
        [2, 500],
        [3, 500],
        [4, 500],
        [5, 204],
      ]);
      expect(d!.attempts.slice(0, 4).every((a) => a.error === 'HTTP 500')).toBe(true);
    });

    it('gives up after five retries: six attempts, then failed', async () => {
      const user = await quickUser(mesh);
      const path = `/flaky/${randomBytes(3).toString('hex')}`;
      flakyFailures.set(path, 100);
      const { id: hookId } = await createHook({ url: receiverUrl(path), events: ['policy.created'] }, user);
      await newPolicy(await newVault(user), user);
      await waitFor(async () => (await deliveries(hookId, user))[0]?.status === 'failed', 60000, 250);
      const [d] = await deliveries(hookId, user);
      expect(d!.attempts).toHaveLength(6);
      await new Promise((r) => setTimeout(r, 500));
      expect(receiver.seen.filter((s) => s.path === path)).toHaveLength(6);
    });

    it('resumes a backlog after the dispatcher is killed, losing no delivery and making none twice', async () => {
      const user = await quickUser(mesh);
      const { id: hookId } = await createHook(
        { url: receiverUrl('/slow-backlog'), events: ['policy.created'] },
        user,
      );
      const vaultId = await newVault(user);
      await mesh.kill('webhook-dispatcher', 'SIGKILL');
      const policies: string[] = [];
      for (let i = 0; i < 30; i++) policies.push(await newPolicy(vaultId, user));
      mesh.restart('webhook-dispatcher');
      await waitFor(async () => bodiesAt('/slow-backlog').length >= 6, 30000, 20);
      await mesh.kill('webhook-dispatcher', 'SIGKILL');
      mesh.restart('webhook-dispatcher');
      await waitFor(
        async () => {
          const ids = new Set(
            bodiesAt('/slow-backlog').map((b) => (b['data'] as Record<string, unknown>)['policy_id']),
          );
          return policies.every((p) => ids.has(p));
        },
        60000,
        250,
      );
      await waitFor(
        async () => (await deliveries(hookId, user)).every((d) => d.status === 'succeeded'),
        20000,
      );
      const history = await deliveries(hookId, user);
      // One delivery per event: a redelivered event never makes a second one.
      expect(history).toHaveLength(30);
      expect(new Set(history.map((d) => d.event_id)).size).toBe(30);
      expect(history.every((d) => d.attempt_count === 1 && d.attempts.length === 1)).toBe(true);
      // A request in flight when the process died may be sent again (at-least-once, the same
      // X-Webhook-Id), never more than the requests one replica has in flight.
      const sent = receiver.seen.filter((s) => s.path === '/slow-backlog');
      const distinct = new Set(sent.map((s) => s.headers['x-webhook-id']));
      expect(distinct.size).toBe(30);
      expect(sent.length - distinct.size).toBeLessThanOrEqual(4);
    });
  });

  describe('SSRF', () => {
    const blocked = () => {
      const p = canary.port;
      return [
        `http://127.0.0.1:${p}/`,
        `http://127.1:${p}/`,
        `http://127.0.1:${p}/`,
        `http://2130706433:${p}/`,
        `http://0x7f000001:${p}/`,
        `http://0x7f.0.0.1:${p}/`,
        `http://0177.0.0.1:${p}/`,
        `http://017700000001:${p}/`,
        `http://127.000.000.001:${p}/`,
        `http://[::1]:${p}/`,
        `http://[0:0:0:0:0:0:0:1]:${p}/`,
        `http://[::ffff:127.0.0.1]:${p}/`,
        `http://[::ffff:7f00:1]:${p}/`,
        `http://[::]:${p}/`,
        `http://0.0.0.0:${p}/`,
        `http://0:${p}/`,
        `http://localhost:${p}/`,
        `http://LOCALHOST.:${p}/`,
        `http://foo.localhost:${p}/`,
        `http://example.com@127.0.0.1:${p}/`,
        `http://127.0.0.1:${p}@example.com/`,
        `http://169.254.169.254/latest/meta-data/`,
        `http://[fd00:ec2::254]/latest/meta-data/`,
        `http://[::ffff:169.254.169.254]/`,
        `http://metadata.google.internal/computeMetadata/v1/`,
        `http://service.internal:${p}/`,
        `http://printer.local:${p}/`,
        `http://10.0.0.1:${p}/`,
        `http://172.16.0.1:${p}/`,
        `http://192.168.1.1:${p}/`,
        `http://100.64.0.1:${p}/`,
        `http://[fe80::1]:${p}/`,
        `http://[fc00::1]:${p}/`,
        `http://224.0.0.1:${p}/`,
        `http://[ff02::1]:${p}/`,
        `http://[2002:7f00:1::]:${p}/`,
        `http://[64:ff9b::7f00:1]:${p}/`,
        `http://%31%32%37.0.0.1:${p}/`,
        `http://loopback.example.test:${p}/`,
        `http://mixed.example.test:${p}/`,
        `http://unknown-name.example.test:${p}/`,
        `http://intranet:${p}/`,
        `ftp://127.0.0.1:${p}/`,
        `file:///etc/passwd`,
      ];
    };

    it('refuses every spelling of an internal destination at creation and stores none of them', async () => {
      dns.records.set('loopback.example.test', ['127.0.0.1']);
      dns.records.set('mixed.example.test', ['93.184.216.34', '127.0.0.1']);
      const corpus = blocked();
      expect(corpus.length).toBeGreaterThanOrEqual(25);
      const results = [];
      for (const url of corpus) {
        const r = await api(mesh, 'POST', '/v1/webhooks', {
          token: owner.token,
          body: { url, events: ['policy.created'] },
        });
        results.push({ url, status: r.status, field: r.body['field'] });
        // The refusal names the host, never echoes a URL that may carry a credential.
        expect(String(r.body['detail'])).not.toContain('/latest/meta-data');
      }
      expect(results.filter((r) => r.status !== 400 || r.field !== 'url')).toEqual([]);
      const stored = await sqlOn(mesh, `SELECT url FROM webhook_dispatcher.webhooks WHERE url LIKE $1`, [
        `%:${canary.port}/%`,
      ]);
      expect(stored).toEqual([]);
    });

    it('checks again at delivery: a name rebound to loopback after creation is refused, and so is a DNS failure', async () => {
      const user = await quickUser(mesh);
      dns.records.set('rebind.example.test', ['93.184.216.34']);
      dns.records.set('vanish.example.test', ['93.184.216.34']);
      const { id: rebound } = await createHook(
        { url: `http://rebind.example.test:${canary.port}/`, events: ['policy.created'] },
        user,
      );
      const { id: vanished } = await createHook(
        { url: `http://vanish.example.test:${canary.port}/`, events: ['policy.created'] },
        user,
      );
      // IPv6 answers at delivery time: loopback, IPv4-mapped loopback, NAT64 of loopback.
      const v6: Array<[string, string]> = [
        ['rebind6.example.test', '::1'],
        ['rebind-mapped.example.test', '::ffff:127.0.0.1'],
        ['rebind-nat64.example.test', '64:ff9b::7f00:1'],
      ];
      const v6Hooks: string[] = [];
      for (const [name] of v6) {
        dns.records.set(name, ['2606:4700::1111']);
        v6Hooks.push(
          (await createHook({ url: `http://${name}:${canary.port}/`, events: ['policy.created'] }, user)).id,
        );
      }
      for (const [name, address] of v6) dns.records.set(name, [address]);
      dns.records.set('rebind.example.test', ['127.0.0.1']);
      dns.records.delete('vanish.example.test');
      await newPolicy(await newVault(user), user);
      await waitFor(
        async () => {
          const a = await deliveries(rebound, user);
          const b = await deliveries(vanished, user);
          return (a[0]?.attempts.length ?? 0) >= 2 && (b[0]?.attempts.length ?? 0) >= 2;
        },
        20000,
        200,
      );
      const [a] = await deliveries(rebound, user);
      const [b] = await deliveries(vanished, user);
      expect(a!.status).toBe('pending');
      expect(a!.attempts[0]).toMatchObject({
        status_code: null,
        error: expect.stringMatching(/^refused: .*loopback/),
      });
      for (const id of v6Hooks) {
        await waitFor(async () => ((await deliveries(id, user))[0]?.attempts.length ?? 0) >= 1, 20000, 100);
        const [d] = await deliveries(id, user);
        expect(d!.attempts[0]).toMatchObject({
          status_code: null,
          error: expect.stringMatching(/^refused: .*loopback/),
        });
      }
      expect(b!.attempts[0]).toMatchObject({
        status_code: null,
        error: expect.stringMatching(/^refused: .*(DNS|dns|resolve)/),
      });
      expect(canary.seen).toHaveLength(0);
    });

    it('does not follow a redirect to 127.0.0.1', async () => {
      const user = await quickUser(mesh);
      const { id } = await createHook({ url: receiverUrl('/redirect'), events: ['policy.created'] }, user);
      await newPolicy(await newVault(user), user);
      await waitFor(async () => ((await deliveries(id, user))[0]?.attempts.length ?? 0) >= 2, 20000, 100);
      const [d] = await deliveries(id, user);
      expect(d!.attempts[0]).toMatchObject({ status_code: 302, error: 'HTTP 302' });
      expect(d!.status).toBe('pending');
      await new Promise((r) => setTimeout(r, 300));
      expect(canary.seen).toHaveLength(0);
    });
  });
});
