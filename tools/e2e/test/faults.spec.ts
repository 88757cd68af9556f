import { randomBytes } from 'node:crypto';
import { SERVICES, type Mesh, startMesh } from '../src/mesh';
import { TEST_PASSWORD, api, quickUser } from '../src/api';
import { waitUntil } from '../src/faults';

type User = Awaited<ReturnType<typeof quickUser>>;
interface AuditEvent {
  id: string;
  action: string;
  request_id: string | null;
  details: Record<string, unknown>;
}

// Issue 15: the mesh rides out its broker's and cache's faults and a kill -9 of any service. One
// private mesh (its own nats-server and redis-server, which these tests stop and start).
describe('the mesh rides out NATS and Redis outages and kill -9 of each service', () => {
  let mesh: Mesh;
  let user: User;
  let vaultId: string;

  beforeAll(async () => {
    mesh = await startMesh({
      extraEnv: { EMAIL_VERIFICATION_REQUIRED: 'false', RATE_LIMIT_RPS: '5000', RATE_LIMIT_BURST: '5000' },
    });
    user = await quickUser(mesh);
    const v = await api(mesh, 'POST', '/v1/vaults', { token: user.token, body: { name: 'faults' } });
    expect(v.status).toBe(201);
    vaultId = v.body['id'] as string;
    expect((await put('seed', 'seed-value')).status).toBe(201);
  });
  afterAll(async () => {
    await mesh?.servers?.nats?.start().catch(() => undefined);
    await mesh?.servers?.redis?.start().catch(() => undefined);
    await mesh?.stop();
  });

  const put = (path: string, value: string) =>
    api(mesh, 'PUT', `/v1/vaults/${vaultId}/secrets/${path}`, { token: user.token, body: { value } });

  async function read(path: string, requestId: string) {
    const res = await fetch(`${mesh.baseUrl}/v1/vaults/${vaultId}/secrets/${path}`, {
      headers: { authorization: `Bearer ${user.token}`, 'x-request-id': requestId },
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown>, headers: res.headers };
  }

  /**
   * Every audit record of the org, paged newest first: records chained while it pages shift the
   * pages, so a record may come twice (kept once, by id; two records of one action have two ids).
   */
  async function auditLog(): Promise<AuditEvent[]> {
    const all = new Map<string, AuditEvent>();
    for (let offset = 0; ; offset += 1000) {
      const r = await api(mesh, 'GET', `/v1/audit/events?limit=1000&offset=${offset}`, { token: user.token });
      if (r.status !== 200) throw new Error(`audit query: ${r.status} ${JSON.stringify(r.body)}`);
      const page = r.body['events'] as AuditEvent[];
      for (const e of page) all.set(e.id, e);
      if (page.length < 1000) return [...all.values()];
    }
  }

  /**
   * A stream of audited writes (new paths) and reads (each with its own request id) from two
   * clients until `stop`; what was acknowledged and every other answer.
   */
  function traffic(tag: string) {
    const writes = new Map<string, string>();
    const reads = new Set<string>();
    const failures: Array<{ op: string; status: number; body: unknown }> = [];
    let stop = false;
    let n = 0;
    const client = async () => {
      while (!stop) {
        const i = n++;
        try {
          if (i % 2 === 0) {
            const path = `${tag}/s${i}`;
            const value = `v-${i}`;
            const r = await put(path, value);
            if (r.status === 201) writes.set(path, value);
            else failures.push({ op: `PUT ${path}`, status: r.status, body: r.body });
          } else {
            const id = `${tag}-${i}-${randomBytes(3).toString('hex')}`;
            const r = await read('seed', id);
            if (r.status === 200) reads.add(id);
            else failures.push({ op: `GET ${id}`, status: r.status, body: r.body });
          }
        } catch (err) {
          failures.push({ op: String(i), status: -1, body: String(err) });
          await new Promise((res) => setTimeout(res, 100));
        }
      }
    };
    const clients = [client(), client()];
    return {
      writes,
      reads,
      failures,
      async stop() {
        stop = true;
        await Promise.all(clients);
      },
    };
  }

  /** Every acknowledged write reads back; each acknowledged op has exactly one chained record; the chain verifies. */
  async function expectAllChainedOnce(t: ReturnType<typeof traffic>) {
    const entries = [...t.writes];
    for (let i = 0; i < entries.length; i += 8) {
      const got = await Promise.all(
        entries.slice(i, i + 8).map(async ([path, value]) => {
          const r = await read(path, `check-${randomBytes(4).toString('hex')}`);
          return { path, status: r.status, value: r.body['value'], want: value };
        }),
      );
      for (const g of got) expect(g).toEqual({ path: g.path, status: 200, value: g.want, want: g.want });
    }
    let log: AuditEvent[] = [];
    const count = () => {
      const readsSeen = log.filter((e) => e.action === 'secret.read' && t.reads.has(e.request_id ?? ''));
      const writesSeen = log.filter(
        (e) => e.action === 'secret.write' && t.writes.has(String(e.details['path'])),
      );
      return { readsSeen, writesSeen };
    };
    await waitUntil(
      async () => {
        log = await auditLog().catch(() => []);
        const { readsSeen, writesSeen } = count();
        return readsSeen.length >= t.reads.size && writesSeen.length >= t.writes.size;
      },
      60_000,
      'every acknowledged operation audited',
      () =>
        `reads ${count().readsSeen.length}/${t.reads.size}, writes ${count().writesSeen.length}/${t.writes.size}`,
    );
    const { readsSeen, writesSeen } = count();
    // Exactly once: no request id and no written path (each written once) has two records.
    expect(new Set(readsSeen.map((e) => e.request_id)).size).toBe(readsSeen.length);
    expect(readsSeen).toHaveLength(t.reads.size);
    expect(new Set(writesSeen.map((e) => e.details['path'])).size).toBe(writesSeen.length);
    const verify = await api(mesh, 'GET', '/v1/audit/verify', { token: user.token });
    expect(verify.body).toMatchObject({ chain_valid: true });
  }

  /** No service process ended on its own (kill -9 restarts are the test's). */
  function expectNoExit() {
    for (const s of SERVICES)
      expect({ s, exit: mesh.processes.get(s)?.exitCode ?? null }).toEqual({ s, exit: null });
  }

  it('reports no unreachable dependency while all are up', async () => {
    for (let i = 0; i < 3; i++) {
      const h = await api(mesh, 'GET', '/v1/health');
      expect(h.status).toBe(200);
      expect(h.body['dependencies_unavailable']).toBeUndefined();
      await new Promise((res) => setTimeout(res, 1000));
    }
  });

  it('NATS stopped for 10 s under audited reads and writes: all served, health says so, every record chained once', async () => {
    const t = traffic('nats');
    try {
      await waitUntil(() => t.writes.size >= 10, 20_000, 'traffic flowing');
      await mesh.servers!.nats!.stop(2000);
      const stoppedAt = Date.now();
      await waitUntil(
        async () => {
          const h = await api(mesh, 'GET', '/v1/health');
          const deps = h.body['dependencies_unavailable'] as Record<string, string[]> | undefined;
          // The services keep serving (the outbox holds the events): 200, naming NATS.
          return h.status === 200 && (deps?.['vault-crypto'] ?? []).includes('nats');
        },
        10_000,
        '/v1/health naming nats',
      );
      await new Promise((res) => setTimeout(res, Math.max(0, 10_000 - (Date.now() - stoppedAt))));
      await mesh.servers!.nats!.start();
      const before = t.writes.size;
      await waitUntil(() => t.writes.size >= before + 10, 20_000, 'traffic after NATS');
    } finally {
      await t.stop();
    }
    expect(t.failures).toEqual([]);
    await expectAllChainedOnce(t);
    await waitUntil(
      async () => {
        const h = await api(mesh, 'GET', '/v1/health');
        return h.status === 200 && h.body['dependencies_unavailable'] === undefined;
      },
      30_000,
      'health clear after NATS',
    );
    expectNoExit();
  }, 300_000);

  it('Redis stopped: credential routes and token checks answer 503 + Retry-After (fail closed); back by itself; a revoked token stays revoked', async () => {
    // A token revoked before Redis loses everything (it keeps nothing on disk).
    const other = await quickUser(mesh);
    expect((await api(mesh, 'DELETE', '/v1/auth/token', { token: other.token })).status).toBe(204);
    expect((await api(mesh, 'GET', '/v1/vaults', { token: other.token })).status).toBe(401);

    await mesh.servers!.redis!.stop(2000);
    let login: Awaited<ReturnType<typeof api>> | undefined;
    await waitUntil(
      async () => {
        login = await api(mesh, 'POST', '/v1/auth/token', {
          body: { email: user.email, password: TEST_PASSWORD },
        });
        return login.status === 503;
      },
      15_000,
      'sign-in refused while Redis is down',
    );
    expect(login!.headers.get('retry-after')).toMatch(/^\d+$/);
    // The e-mailed links' HTML pages are credential routes too: their limiter refuses, as a page.
    const page = await fetch(`${mesh.baseUrl}/reset-password`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        token: `cse_${'A'.repeat(16)}_${'b'.repeat(43)}`,
        new_password: 'x',
      }).toString(),
    });
    expect({ status: page.status, retryAfter: page.headers.get('retry-after') }).toEqual({
      status: 503,
      retryAfter: expect.stringMatching(/^\d+$/),
    });
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    // A secret read needs the revocation check: refused, never served unchecked.
    const r = await read('seed', `redis-down-${randomBytes(3).toString('hex')}`);
    expect({ status: r.status, retryAfter: r.headers.get('retry-after') }).toEqual({
      status: 503,
      retryAfter: expect.stringMatching(/^\d+$/),
    });
    // Every token is refused meanwhile, so /v1/health says the API does not work, and why.
    await waitUntil(
      async () => {
        const h = await api(mesh, 'GET', '/v1/health');
        const deps = h.body['dependencies_unavailable'] as Record<string, string[]> | undefined;
        return (
          h.status === 503 &&
          ((h.body['unavailable'] as string[] | undefined) ?? []).includes('gateway') &&
          (deps?.['gateway'] ?? []).includes('redis')
        );
      },
      10_000,
      '/v1/health naming redis',
    );

    await mesh.servers!.redis!.start();
    await waitUntil(
      async () => (await read('seed', `redis-back-${randomBytes(3).toString('hex')}`)).status === 200,
      30_000,
      'reads after Redis',
    );
    const again = await api(mesh, 'POST', '/v1/auth/token', {
      body: { email: user.email, password: TEST_PASSWORD },
    });
    expect(again.status).toBe(200);
    // Identity put the live revocations back into the empty Redis as it reconnected (a read served
    // above means the list is complete: verifiers refuse until identity's marker is back).
    expect((await api(mesh, 'GET', '/v1/vaults', { token: other.token })).status).toBe(401);
    expectNoExit();
  }, 300_000);

  it('kill -9 of each service in turn under a request stream: after its restart nothing acknowledged is missing and no record is duplicated', async () => {
    const t = traffic('kill');
    try {
      for (const s of SERVICES) {
        const before = t.writes.size + t.reads.size;
        await waitUntil(
          () => t.writes.size + t.reads.size >= before + 6,
          30_000,
          `traffic before killing ${s}`,
        );
        await mesh.kill(s, 'SIGKILL');
        mesh.restart(s);
        const after = t.writes.size + t.reads.size;
        await waitUntil(
          () => t.writes.size + t.reads.size >= after + 6,
          60_000,
          `traffic after restarting ${s}`,
        );
      }
    } finally {
      await t.stop();
    }
    // Refusals while a service was away are expected (503, or no answer while the gateway was).
    for (const f of t.failures) expect([503, -1]).toContain(f.status);
    await expectAllChainedOnce(t);
    expectNoExit();
  }, 600_000);
});
