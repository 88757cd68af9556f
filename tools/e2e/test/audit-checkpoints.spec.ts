import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { waitFor } from '@custos/service-kit/testing';
import { api, quickUser } from '../src/api';
import { sqlOn } from '../src/db';
import { sharedMesh, type Mesh } from '../src/mesh';

type User = Awaited<ReturnType<typeof quickUser>>;
type Json = Record<string, unknown>;

// The offline verifier, built by `pnpm turbo run build` (tools/audit-verify).
const VERIFIER = path.resolve(__dirname, '..', '..', 'audit-verify', 'dist', 'main.js');
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('audit checkpoints: a signed head catches records removed from the end, online and offline', () => {
  let mesh: Mesh;
  let owner: User;
  let dir: string;

  beforeAll(async () => {
    if (!existsSync(VERIFIER)) throw new Error(`${VERIFIER} is missing: build @custos/audit-verify first`);
    mesh = await sharedMesh();
    owner = await quickUser(mesh);
    dir = mkdtempSync(path.join(tmpdir(), 'audit-verify-'));
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const get = async (p: string, user = owner) => {
    const r = await api(mesh, 'GET', p, { token: user.token });
    if (r.status !== 200) throw new Error(`GET ${p}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body as Json;
  };

  /** The org's head once every record the actions above sent has been chained (three equal reads). */
  async function settledHead(atLeast: number): Promise<number> {
    const reads: number[] = [];
    await waitFor(
      async () => {
        const r = await get('/v1/audit/events?limit=1');
        const events = r['events'] as Json[];
        reads.push(events.length > 0 ? Number(events[0]!['sequence']) : 0);
        const [a, b, c] = reads.slice(-3);
        return reads.length >= 3 && a! >= atLeast && a === b && b === c;
      },
      30000,
      400,
    );
    return reads.at(-1)!;
  }

  function verifyOffline(exportFile: string, args: string[]): { code: number | null; report: Json } {
    const r = spawnSync(process.execPath, [VERIFIER, exportFile, ...args], { encoding: 'utf8' });
    if (r.status === 2) throw new Error(`audit-verify usage error: ${r.stderr}`);
    return { code: r.status, report: JSON.parse(r.stdout) as Json };
  }

  it('verify and the offline verifier accept the intact chain and catch the last 3 records removed with the head rewound', async () => {
    // Records of this org: a vault and some secrets.
    const vault = await api(mesh, 'POST', '/v1/vaults', {
      token: owner.token,
      body: { name: `cp-${randomBytes(3).toString('hex')}` },
    });
    expect(vault.status).toBe(201);
    for (let i = 0; i < 5; i++) {
      const w = await api(mesh, 'PUT', `/v1/vaults/${vault.body['id']}/secrets/app/k${i}`, {
        token: owner.token,
        body: { type: 'password', value: `v-${randomBytes(6).toString('hex')}` },
      });
      expect(w.status).toBe(201);
    }
    const head = await settledHead(6);

    // A checkpoint on demand, of the head as it is.
    const made = await api(mesh, 'POST', '/v1/audit/checkpoints', { token: owner.token });
    expect(made.status).toBe(201);
    const cp = made.body as Json;
    expect(cp).toMatchObject({ org_id: owner.orgId, sequence: head });
    expect(String(cp['id'])).toMatch(UUID);
    const listed = await get('/v1/audit/checkpoints');
    const key = listed['key'] as Json;
    expect(String(key['public_key'])).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    expect((listed['checkpoints'] as Json[]).map((c) => c['id'])).toContain(cp['id']);
    // Kept apart from the service, as an operator would.
    const savedCheckpoints = path.join(dir, 'checkpoints.json');
    writeFileSync(savedCheckpoints, JSON.stringify(listed));
    const publicKeyFile = path.join(dir, 'checkpoint.pub');
    writeFileSync(publicKeyFile, String(key['public_key_pem']));

    // Records carry the HMAC key version.
    const events = (await get('/v1/audit/events?limit=1000'))['events'] as Json[];
    expect(new Set(events.map((e) => e['key_version']))).toEqual(new Set([1]));

    const intact = await get(`/v1/audit/verify?checkpoint=${cp['id']}`);
    expect(intact).toMatchObject({
      chain_valid: true,
      reason: null,
      checkpoint: {
        id: cp['id'],
        sequence: head,
        signature_valid: true,
        record_matches: true,
        head_at_or_after: true,
      },
    });

    const before = await get('/v1/audit/export');
    expect(before).toMatchObject({
      format: 'custos-audit-export-v1',
      org_id: owner.orgId,
      head: { sequence: head },
    });
    expect((before['events'] as Json[]).map((e) => e['sequence'])).toEqual(
      Array.from({ length: head }, (_, i) => i + 1),
    );
    const beforeFile = path.join(dir, 'before.json');
    writeFileSync(beforeFile, JSON.stringify(before));
    const ok = verifyOffline(beforeFile, ['--public-key', publicKeyFile]);
    expect(ok).toMatchObject({ code: 0, report: { valid: true, links_checked: head, anchored_at: head } });
    const withHmac = verifyOffline(beforeFile, [
      '--public-key',
      String(key['public_key']),
      '--hmac-key',
      mesh.env['AUDIT_HMAC_KEY']!,
    ]);
    expect(withHmac).toMatchObject({
      code: 0,
      report: { valid: true, hmac_checked: head, hmac_unchecked: 0 },
    });

    // Tamper as the database owner: the last 3 records deleted (the append-only trigger off for
    // this transaction only) and the head rewound to the record before them.
    expect(await settledHead(head)).toBe(head);
    const org = owner.orgId;
    if (!UUID.test(org)) throw new Error('unexpected org id');
    await sqlOn(
      mesh,
      `BEGIN;
       ALTER TABLE audit.events DISABLE TRIGGER events_append_only;
       DELETE FROM audit.events WHERE org_id = '${org}' AND seq > ${head - 3};
       ALTER TABLE audit.events ENABLE TRIGGER events_append_only;
       UPDATE audit.chain_heads h SET seq = e.seq, hash = e.integrity_hash FROM audit.events e
        WHERE h.org_id = '${org}' AND e.org_id = '${org}' AND e.seq = ${head - 3};
       COMMIT;`,
    );
    const [rewound] = await sqlOn<{ seq: string }>(
      mesh,
      `SELECT seq FROM audit.chain_heads WHERE org_id = $1`,
      [org],
    );
    expect(Number(rewound!.seq)).toBe(head - 3);

    // The chain alone looks whole; against the checkpoint it does not.
    expect(await get('/v1/audit/verify')).toMatchObject({ chain_valid: true });
    expect(await get(`/v1/audit/verify?checkpoint=${cp['id']}`)).toMatchObject({
      chain_valid: false,
      reason: 'checkpoint_mismatch',
      broken_at_sequence: head,
      checkpoint: { signature_valid: true, record_matches: false, head_at_or_after: false },
    });

    // Offline: the export taken now fails against its checkpoints and against the one kept apart.
    const after = await get('/v1/audit/export');
    expect((after['events'] as Json[]).length).toBe(head - 3);
    const afterFile = path.join(dir, 'after.json');
    writeFileSync(afterFile, JSON.stringify(after));
    const caught = verifyOffline(afterFile, ['--public-key', publicKeyFile]);
    expect(caught.code).toBe(1);
    expect((caught.report['problems'] as string[]).join('\n')).toMatch(/no record at that position/);
    // Even with the checkpoint also gone from the export (it cannot be deleted by the service, but
    // the owner could), the checkpoint kept apart catches it.
    const stripped = { ...after, checkpoints: [] };
    const strippedFile = path.join(dir, 'stripped.json');
    writeFileSync(strippedFile, JSON.stringify(stripped));
    const apart = verifyOffline(strippedFile, [
      '--public-key',
      publicKeyFile,
      '--checkpoint',
      savedCheckpoints,
    ]);
    expect(apart.code).toBe(1);
    expect((apart.report['problems'] as string[]).join('\n')).toMatch(/no record at that position/);
    // The export from before the tampering still verifies.
    expect(verifyOffline(beforeFile, ['--public-key', publicKeyFile]).code).toBe(0);
  });

  it("checkpoints are org-scoped: another org's owner cannot read or use them", async () => {
    const other = await quickUser(mesh);
    const made = await api(mesh, 'POST', '/v1/audit/checkpoints', { token: owner.token });
    expect([200, 201]).toContain(made.status);
    const r = await api(mesh, 'GET', `/v1/audit/verify?checkpoint=${made.body['id']}`, {
      token: other.token,
    });
    expect(r.status).toBe(404);
    const theirs = await get('/v1/audit/checkpoints', other);
    expect((theirs['checkpoints'] as Json[]).map((c) => c['id'])).not.toContain(made.body['id']);
  });
});
