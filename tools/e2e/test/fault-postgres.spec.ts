import { SERVICES, type Mesh, startMesh } from '../src/mesh';
import { api, quickUser } from '../src/api';
import { PrivatePostgres } from '../src/private-postgres';
import { waitUntil } from '../src/faults';

// Issue 15: Postgres restarted under concurrent writes. This file's mesh keeps its databases in a
// cluster of its own (durable settings), which the test stops and starts: nothing else on the
// machine sees it.
describe('the mesh rides out a Postgres restart under concurrent writes', () => {
  let pg: PrivatePostgres;
  let mesh: Mesh;

  beforeAll(async () => {
    pg = await PrivatePostgres.start({ maxConnections: 200 });
    process.once('exit', () => pg.destroySync());
    mesh = await startMesh({
      postgresUrl: (db) => pg.url(db),
      extraEnv: { EMAIL_VERIFICATION_REQUIRED: 'false', RATE_LIMIT_RPS: '5000', RATE_LIMIT_BURST: '5000' },
    });
  });
  afterAll(async () => {
    // A failed test may have left the cluster stopped: the mesh's database is dropped from it.
    await pg?.resume().catch(() => undefined);
    await mesh?.stop().catch(() => undefined);
    await pg?.destroy();
  });

  it('no service exits; the gap answers 503 + Retry-After and /v1/health names Postgres; every acknowledged write reads back; the chain verifies', async () => {
    const u = await quickUser(mesh);
    const vault = await api(mesh, 'POST', '/v1/vaults', { token: u.token, body: { name: 'faults' } });
    expect(vault.status).toBe(201);
    const vaultId = vault.body['id'] as string;

    const acknowledged = new Map<string, string>();
    const unexpected: Array<{ status: number; retryAfter: string | null; body: unknown }> = [];
    let refusedInGap = 0;
    let stop = false;
    let n = 0;
    const writer = async (w: number) => {
      while (!stop) {
        const i = n++;
        const path = `w${w}/s${i}`;
        const value = `value-${i}`;
        try {
          const r = await api(mesh, 'PUT', `/v1/vaults/${vaultId}/secrets/${path}`, {
            token: u.token,
            body: { value },
          });
          if (r.status === 201) acknowledged.set(path, value);
          else if (r.status === 503 && r.headers.get('retry-after') === '5') refusedInGap++;
          else unexpected.push({ status: r.status, retryAfter: r.headers.get('retry-after'), body: r.body });
          if (r.status !== 201) await new Promise((res) => setTimeout(res, 50));
        } catch (err) {
          // The gateway itself must keep answering: a refused connection is a failure.
          unexpected.push({ status: -1, retryAfter: null, body: String(err) });
          await new Promise((res) => setTimeout(res, 100));
        }
      }
    };
    const writers = Array.from({ length: 6 }, (_, w) => writer(w));
    let recoveredInMs: number;
    try {
      await waitUntil(() => acknowledged.size >= 30, 30_000, 'writes flowing');
      // Stopped the way an operator's restart or a failover does (fast: sessions are ended).
      await pg.stopServer('fast');
      // While it is down, /v1/health names the services that cannot serve, and why.
      let health: Awaited<ReturnType<typeof api>> | undefined;
      await waitUntil(
        async () => {
          health = await api(mesh, 'GET', '/v1/health');
          const deps = health.body['dependencies_unavailable'] as Record<string, string[]> | undefined;
          const unavailable = (health.body['unavailable'] as string[] | undefined) ?? [];
          // Both answers come from one probe round of vault-crypto, but from two health calls.
          return (
            health.status === 503 &&
            unavailable.includes('vault-crypto') &&
            (deps?.['vault-crypto'] ?? []).includes('postgres')
          );
        },
        15_000,
        '/v1/health naming postgres',
      );
      expect(health!.headers.get('retry-after')).toBe('5');
      expect(health!.body['detail']).toContain('vault-crypto (postgres unreachable)');
      await pg.resume();
      const back = Date.now();
      // Counted from here: writes acknowledged before the stop took effect do not count.
      const before = acknowledged.size;
      // The mesh serves writes again within 30 s of Postgres being back.
      await waitUntil(
        () => acknowledged.size >= before + 30,
        30_000,
        'writes resuming',
        () => {
          const exited = SERVICES.filter((s) => mesh.processes.get(s)?.exitCode !== null);
          return `exited: ${exited.join(', ') || 'none'}; last unexpected: ${JSON.stringify(unexpected.slice(-3))}`;
        },
      );
      recoveredInMs = Date.now() - back;
    } finally {
      stop = true;
      await Promise.all(writers);
    }

    // For docs/operations.md (the 30 s below is the requirement; the figure is reported, not asserted).
    console.log(
      `writes served again ${recoveredInMs} ms after Postgres was back; ${refusedInGap} refused in the gap`,
    );
    expect(unexpected).toEqual([]);
    // The restart was seen: writes were refused (503 + Retry-After) while Postgres was down.
    expect(refusedInGap).toBeGreaterThan(0);
    // No service process exited.
    for (const s of SERVICES)
      expect({ s, exit: mesh.processes.get(s)?.exitCode ?? null }).toEqual({ s, exit: null });
    // Every acknowledged write reads back (eight at a time).
    const entries = [...acknowledged];
    for (let i = 0; i < entries.length; i += 8) {
      const got = await Promise.all(
        entries.slice(i, i + 8).map(async ([path, value]) => {
          const r = await api(mesh, 'GET', `/v1/vaults/${vaultId}/secrets/${path}`, { token: u.token });
          return { path, status: r.status, value: r.body['value'], want: value };
        }),
      );
      for (const g of got) expect(g).toEqual({ path: g.path, status: 200, value: g.want, want: g.want });
    }
    // Health is green again by itself, and the audit chain verifies.
    await waitUntil(async () => (await api(mesh, 'GET', '/v1/health')).status === 200, 30_000, 'health 200');
    await waitUntil(
      async () => {
        const v = await api(mesh, 'GET', '/v1/audit/verify', { token: u.token });
        return v.status === 200 && v.body['chain_valid'] === true;
      },
      30_000,
      'chain verifies',
    );
  }, 300_000);

  it('a service started while Postgres is down waits for it, and serves once it is back', async () => {
    const u = await quickUser(mesh);
    const vault = await api(mesh, 'POST', '/v1/vaults', { token: u.token, body: { name: 'cold-start' } });
    expect(vault.status).toBe(201);
    const vaultId = vault.body['id'] as string;
    const put = await api(mesh, 'PUT', `/v1/vaults/${vaultId}/secrets/cold/one`, {
      token: u.token,
      body: { value: 'before' },
    });
    expect(put.status).toBe(201);

    await pg.stopServer('fast');
    try {
      // Killed outright (a crash, an evicted pod): what matters is how it starts again.
      await mesh.kill('vault-crypto', 'SIGKILL');
      const seen = mesh.output.get('vault-crypto')!.length;
      mesh.restart('vault-crypto');
      // It says it waits, and keeps waiting (an exit would leave Kubernetes a crash loop).
      await waitUntil(
        () =>
          mesh.output
            .get('vault-crypto')!
            .slice(seen)
            .some((l) => l.includes('Postgres is unreachable; waiting for it')),
        20_000,
        'vault-crypto saying it waits for Postgres',
      );
      await new Promise((r) => setTimeout(r, 3000));
      expect(mesh.processes.get('vault-crypto')?.exitCode ?? null).toBeNull();
      // Meanwhile its routes answer 503 with Retry-After, not a connection error.
      const gap = await api(mesh, 'GET', `/v1/vaults/${vaultId}/secrets/cold/one`, { token: u.token });
      expect(gap.status).toBe(503);
      expect(gap.headers.get('retry-after')).toBe('5');
      // The e-mailed links' HTML pages too: a well-formed token needs identity's database.
      const token = `cse_${'A'.repeat(16)}_${'b'.repeat(43)}`;
      for (const [page, form] of [
        ['/verify-email', { token }],
        ['/reset-password', { token, new_password: 'Another-Passw0rd!' }],
      ] as const) {
        const r = await fetch(`${mesh.baseUrl}${page}`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams(form).toString(),
        });
        const html = await r.text();
        expect({ page, status: r.status, retryAfter: r.headers.get('retry-after') }).toEqual({
          page,
          status: 503,
          retryAfter: '5',
        });
        expect(r.headers.get('content-type')).toMatch(/^text\/html/);
        expect(html).not.toMatch(/ECONNREFUSED|at \w+ \(|stack/i);
      }
    } finally {
      await pg.resume();
    }
    await waitUntil(
      async () => {
        const r = await api(mesh, 'GET', `/v1/vaults/${vaultId}/secrets/cold/one`, { token: u.token });
        return r.status === 200 && r.body['value'] === 'before';
      },
      60_000,
      'the restarted vault-crypto serving the secret',
    );
    expect(mesh.processes.get('vault-crypto')?.exitCode ?? null).toBeNull();
  }, 180_000);
});
