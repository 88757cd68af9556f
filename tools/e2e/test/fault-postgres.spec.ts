import { SERVICES, type Mesh, startMesh } from '../src/mesh';
import { api, quickUser } from '../src/api';
import { PrivatePostgres } from '../src/private-postgres';

// Issue 15: Postgres restarted under concurrent writes. This file's mesh keeps its databases in a
// cluster of its own (durable settings), which the test restarts: nothing else on the machine sees it.
describe('the mesh rides out a Postgres restart under concurrent writes', () => {
  let pg: PrivatePostgres;
  let mesh: Mesh;

  beforeAll(async () => {
    pg = await PrivatePostgres.start({ maxConnections: 200 });
    mesh = await startMesh({
      postgresUrl: (db) => pg.url(db),
      extraEnv: { EMAIL_VERIFICATION_REQUIRED: 'false', RATE_LIMIT_RPS: '5000', RATE_LIMIT_BURST: '5000' },
    });
  });
  afterAll(async () => {
    await mesh?.stop();
    await pg?.destroy();
  });

  it('no service exits; writes in the gap get 503 with Retry-After; every acknowledged write reads back; the chain verifies', async () => {
    const u = await quickUser(mesh);
    const vault = await api(mesh, 'POST', '/v1/vaults', { token: u.token, body: { name: 'faults' } });
    expect(vault.status).toBe(201);
    const vaultId = vault.body['id'] as string;

    const acknowledged = new Map<string, string>();
    const otherStatuses: Array<{ status: number; retryAfter: string | null; body: unknown }> = [];
    let refusedInGap = 0;
    let stop = false;
    let n = 0;
    const writer = async (w: number) => {
      while (!stop) {
        const i = n++;
        const path = `w${w}/s${i}`;
        const value = `value-${i}`;
        let r;
        try {
          r = await api(mesh, 'PUT', `/v1/vaults/${vaultId}/secrets/${path}`, {
            token: u.token,
            body: { value },
          });
        } catch (err) {
          // The gateway itself must keep answering: a refused connection is a failure.
          otherStatuses.push({ status: -1, retryAfter: null, body: String(err) });
          await new Promise((res) => setTimeout(res, 100));
          continue;
        }
        if (r.status === 201) acknowledged.set(path, value);
        else if (r.status === 503 && r.headers.get('retry-after')) refusedInGap++;
        else otherStatuses.push({ status: r.status, retryAfter: r.headers.get('retry-after'), body: r.body });
        if (r.status !== 201) await new Promise((res) => setTimeout(res, 50));
      }
    };
    const writers = Array.from({ length: 6 }, (_, w) => writer(w));
    // Writes flow; then Postgres restarts (fast: sessions are ended, as an operator's restart does).
    await waitUntil(() => acknowledged.size >= 30, 30_000);
    const before = acknowledged.size;
    await pg.stopServer('fast');
    await new Promise((res) => setTimeout(res, 3000));
    await pg.resume();
    const back = Date.now();
    // The mesh serves writes again within 30 s of Postgres being back.
    try {
      await waitUntil(() => acknowledged.size >= before + 30, 30_000);
    } catch {
      const exited = SERVICES.filter((s) => mesh.processes.get(s)?.exitCode !== null);
      const tails = exited.map((s) => `--- ${s}\n${(mesh.output.get(s) ?? []).slice(-6).join('\n')}`);
      throw new Error(
        `writes did not resume within 30 s; exited: ${exited.join(', ') || 'none'}; last other statuses: ${JSON.stringify(otherStatuses.slice(-3))}\n${tails.join('\n')}`,
      );
    } finally {
      stop = true;
      await Promise.all(writers);
    }
    const recoveredInMs = Date.now() - back;

    expect(otherStatuses).toEqual([]);
    expect(recoveredInMs).toBeLessThan(30_000);
    // No service process exited.
    for (const s of SERVICES)
      expect({ s, exit: mesh.processes.get(s)?.exitCode ?? null }).toEqual({ s, exit: null });
    // Every acknowledged write reads back.
    for (const [path, value] of acknowledged) {
      const r = await api(mesh, 'GET', `/v1/vaults/${vaultId}/secrets/${path}`, { token: u.token });
      expect({ path, status: r.status, value: r.body['value'] }).toEqual({ path, status: 200, value });
    }
    // The health endpoint is green again and the audit chain verifies.
    expect((await api(mesh, 'GET', '/v1/health')).status).toBe(200);
    await waitUntil(async () => {
      const v = await api(mesh, 'GET', '/v1/audit/verify', { token: u.token });
      return v.status === 200 && v.body['chain_valid'] === true;
    }, 30_000);
    // The restart was seen: some writes were refused (503 + Retry-After) while Postgres was down.
    expect(refusedInGap).toBeGreaterThan(0);
  });
});

async function waitUntil(check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms`);
    await new Promise((res) => setTimeout(res, 100));
  }
}
