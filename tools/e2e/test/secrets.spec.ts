import { TEST_PASSWORD, api, countStatuses, expectProblem, quickUser } from '../src/api';
import { sqlOn } from '../src/db';
import { sharedMesh, type Mesh } from '../src/mesh';

type User = Awaited<ReturnType<typeof quickUser>>;

const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';

describe('secrets: versions, values, limits and what is stored', () => {
  let mesh: Mesh;
  let owner: User;
  let vaultId: string;

  beforeAll(async () => {
    mesh = await sharedMesh();
    owner = await quickUser(mesh);
    const v = await api(mesh, 'POST', '/v1/vaults', { token: owner.token, body: { name: 'app' } });
    expect(v.status).toBe(201);
    vaultId = v.body['id'] as string;
  });
  afterAll(() => mesh?.stop());

  const put = (path: string, body: Record<string, unknown>, token = owner.token) =>
    api(mesh, 'PUT', `/v1/vaults/${vaultId}/secrets/${path}`, { token, body });
  const get = (path: string, token = owner.token) =>
    api(mesh, 'GET', `/v1/vaults/${vaultId}/secrets/${path}`, { token });

  it('stores version n+1 on every PUT and reads the latest, with metadata', async () => {
    const first = await put('prod/db/password', {
      type: 'password',
      value: 'hunter2',
      metadata: { owner: 'ops' },
    });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({
      id: expect.any(String),
      path: 'prod/db/password',
      type: 'password',
      version: 1,
      metadata: { owner: 'ops' },
      created_at: expect.any(String),
      expires_at: null,
    });
    expect(first.body).not.toHaveProperty('value');
    const second = await put('prod/db/password', { type: 'password', value: 'hunter3' });
    expect(second.body).toMatchObject({ version: 2 });

    const read = await get('prod/db/password');
    expect(read.status).toBe(200);
    expect(read.headers.get('cache-control')).toBe('no-store');
    expect(read.body).toMatchObject({
      path: 'prod/db/password',
      type: 'password',
      version: 2,
      value: 'hunter3',
      value_encoding: 'utf8',
    });
  });

  it('returns UTF-8 text when the bytes are text, base64 otherwise, and says which', async () => {
    const bytes = Buffer.from([0xff, 0x00, 0xfe, 0x80]);
    expect(
      (await put('bin/blob', { type: 'file', value: bytes.toString('base64'), value_encoding: 'base64' }))
        .status,
    ).toBe(201);
    expect((await get('bin/blob')).body).toMatchObject({
      value: bytes.toString('base64'),
      value_encoding: 'base64',
    });
    expect(
      (
        await put('bin/text', {
          type: 'file',
          value: Buffer.from('héllo').toString('base64'),
          value_encoding: 'base64',
        })
      ).status,
    ).toBe(201);
    expect((await get('bin/text')).body).toMatchObject({ value: 'héllo', value_encoding: 'utf8' });
  });

  it('lists the latest version of each live path, never a value, filtered by ?prefix=', async () => {
    await put('list/a', { value: 'A1' });
    await put('list/a', { value: 'A2' });
    await put('list/b/c', { type: 'api_key', value: 'B' });
    await put('other/x', { value: 'X' });
    const all = await api(mesh, 'GET', `/v1/vaults/${vaultId}/secrets`, { token: owner.token });
    expect(all.status).toBe(200);
    const secrets = all.body['secrets'] as Array<Record<string, unknown>>;
    expect(JSON.stringify(secrets)).not.toMatch(/A1|A2|"value"/);
    const listed = await api(mesh, 'GET', `/v1/vaults/${vaultId}/secrets?prefix=list/`, {
      token: owner.token,
    });
    expect(listed.body['secrets']).toEqual([
      expect.objectContaining({ path: 'list/a', version: 2, type: 'note' }),
      expect.objectContaining({ path: 'list/b/c', version: 1, type: 'api_key' }),
    ]);
    for (const s of listed.body['secrets'] as Array<Record<string, unknown>>) {
      expect(Object.keys(s)).toEqual(
        expect.arrayContaining(['id', 'path', 'type', 'version', 'metadata', 'created_at', 'expires_at']),
      );
    }
  });

  it('refuses bad paths and bad fields with 400 naming the field, storing nothing', async () => {
    for (const bad of ['a//b', 'a/b/', 'a.b', 'a%20b', 'a/%2Fb', 'x'.repeat(513)]) {
      expectProblem(await put(bad, { value: 'v' }), 400, { field: 'path' });
    }
    expectProblem(await put('f/1', { type: 'blob', value: 'v' }), 400, { field: 'type' });
    expectProblem(await put('f/1', { type: 'note' }), 400, { field: 'value' });
    expectProblem(await put('f/1', { value: 42 }), 400, { field: 'value' });
    expectProblem(await put('f/1', { value: 'v', value_encoding: 'hex' }), 400, { field: 'value_encoding' });
    expectProblem(await put('f/1', { value: '%%%', value_encoding: 'base64' }), 400, { field: 'value' });
    expectProblem(await put('f/1', { value: 'v', metadata: [1] }), 400, { field: 'metadata' });
    expectProblem(await put('f/1', { value: 'v', max_access_count: 0 }), 400, { field: 'max_access_count' });
    expectProblem(await put('f/1', { value: 'v', max_access_count: -3 }), 400, { field: 'max_access_count' });
    expectProblem(await put('f/1', { value: 'v', expires_at: 'tomorrow' }), 400, { field: 'expires_at' });
    expectProblem(await put('f/1', { value: 'v', expires_at: '2001-01-01T00:00:00Z' }), 400, {
      field: 'expires_at',
    });
    expectProblem(await put('f/1', { value: 'v', colour: 'red' }), 400, { field: 'colour' });
    expectProblem(await put('f/1', { type: 'env_bundle', value: '{"A": 1}' }), 400, { field: 'value' });
    expectProblem(await get('f/1'), 404);
  });

  it('answers 404 for unknown vaults, paths, and another org’s vault', async () => {
    expectProblem(await api(mesh, 'GET', `/v1/vaults/${UNKNOWN_ID}/secrets/a`, { token: owner.token }), 404);
    expectProblem(await api(mesh, 'GET', `/v1/vaults/not-a-uuid/secrets/a`, { token: owner.token }), 404);
    expectProblem(await get('never/written'), 404);
    const stranger = await quickUser(mesh);
    expectProblem(await get('prod/db/password', stranger.token), 404);
    expectProblem(await put('prod/db/password', { value: 'pwned' }, stranger.token), 404);
    expect((await get('prod/db/password')).body).toMatchObject({ value: 'hunter3' });
    expectProblem(await api(mesh, 'GET', `/v1/vaults/${vaultId}/secrets/a`), 401);
  });

  it('lists, reads and disables versions at the paths DECISIONS.md names', async () => {
    await put('ver/key', { value: 'one' });
    await put('ver/key', { value: 'two' });
    const versions = await api(mesh, 'GET', `/v1/vaults/${vaultId}/secret-versions/ver/key`, {
      token: owner.token,
    });
    expect(versions.status).toBe(200);
    expect((versions.body['versions'] as Array<{ version: number }>).map((v) => v.version)).toEqual([2, 1]);
    const v1 = await api(mesh, 'GET', `/v1/vaults/${vaultId}/secret-version/ver/key/1`, {
      token: owner.token,
    });
    expect(v1.body).toMatchObject({ version: 1, value: 'one' });
    const disabled = await api(mesh, 'POST', `/v1/vaults/${vaultId}/secret-version-disable/ver/key/1`, {
      token: owner.token,
    });
    expect(disabled.status).toBe(200);
    expect(disabled.body).toMatchObject({ version: 1, is_disabled: true });
    expectProblem(
      await api(mesh, 'GET', `/v1/vaults/${vaultId}/secret-version/ver/key/1`, { token: owner.token }),
      410,
    );
    expect((await get('ver/key')).body).toMatchObject({ version: 2, value: 'two' });
    expectProblem(
      await api(mesh, 'GET', `/v1/vaults/${vaultId}/secret-version/ver/key/9`, { token: owner.token }),
      404,
    );
    expectProblem(
      await api(mesh, 'GET', `/v1/vaults/${vaultId}/secret-version/ver/key/0`, { token: owner.token }),
      400,
      {
        field: 'version',
      },
    );
  });

  it('rotates server-side: a new version with a generated value of the asked length and charset', async () => {
    await put('rot/token', { type: 'api_key', value: 'old', metadata: { svc: 'x' } });
    const r = await api(mesh, 'POST', `/v1/vaults/${vaultId}/secret-rotate/rot/token`, {
      token: owner.token,
      body: { length: 40, charset: 'hex' },
    });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ version: 2, type: 'api_key', metadata: { svc: 'x' } });
    expect((await get('rot/token')).body['value']).toMatch(/^[0-9a-f]{40}$/);
    const bad = await api(mesh, 'POST', `/v1/vaults/${vaultId}/secret-rotate/rot/token`, {
      token: owner.token,
      body: { length: 4 },
    });
    expectProblem(bad, 400, { field: 'length' });
    expectProblem(
      await api(mesh, 'POST', `/v1/vaults/${vaultId}/secret-rotate/rot/token`, {
        token: owner.token,
        body: { charset: 'emoji' },
      }),
      400,
      { field: 'charset' },
    );
  });

  it('soft-deletes every version of a path; a later PUT continues the numbering', async () => {
    await put('del/me', { value: 'a' });
    await put('del/me', { value: 'b' });
    const del = await api(mesh, 'DELETE', `/v1/vaults/${vaultId}/secrets/del/me`, { token: owner.token });
    expect(del.status).toBe(204);
    expectProblem(await get('del/me'), 404);
    expectProblem(
      await api(mesh, 'GET', `/v1/vaults/${vaultId}/secret-version/del/me/1`, { token: owner.token }),
      404,
    );
    expectProblem(
      await api(mesh, 'DELETE', `/v1/vaults/${vaultId}/secrets/del/me`, { token: owner.token }),
      404,
    );
    const rows = await sqlOn<{ n: string }>(
      mesh,
      `SELECT count(*) AS n FROM vault_crypto.secret_versions WHERE vault_id = $1 AND path = 'del/me' AND deleted_at IS NOT NULL`,
      [vaultId],
    );
    expect(rows[0]!.n).toBe('2');
    expect((await put('del/me', { value: 'c' })).body).toMatchObject({ version: 3 });
  });

  it('answers 410 after expires_at', async () => {
    const expiresAt = new Date(Date.now() + 1500).toISOString();
    expect((await put('exp/soon', { value: 'short-lived', expires_at: expiresAt })).body).toMatchObject({
      expires_at: expiresAt,
    });
    expect((await get('exp/soon')).status).toBe(200);
    await new Promise((r) => setTimeout(r, 2000));
    expectProblem(await get('exp/soon'), 410);
  });

  it('200 concurrent reads of a secret with max_access_count 5 return exactly 5 values', async () => {
    expect((await put('limited/once', { value: 'five-times', max_access_count: 5 })).status).toBe(201);
    const reads = await Promise.all(Array.from({ length: 200 }, () => get('limited/once')));
    const ok = reads.filter((r) => r.status === 200);
    // Every answer is a value or a 410: counted first, so a failure names any other status.
    expect(countStatuses(reads)).toEqual({ 200: 5, 410: 195 });
    expect(ok).toHaveLength(5);
    expect(ok.every((r) => r.body['value'] === 'five-times')).toBe(true);
    expect(reads.filter((r) => r.status === 410)).toHaveLength(195);
    for (const r of reads.filter((x) => x.status !== 200)) expect(r.body['value']).toBeUndefined();
    const [row] = await sqlOn<{ access_count: string }>(
      mesh,
      `SELECT access_count FROM vault_crypto.secret_versions WHERE vault_id = $1 AND path = 'limited/once'`,
      [vaultId],
    );
    expect(row!.access_count).toBe('5');
  });

  it('HEAD on a value read is 405 and spends nothing: the one read a max_access_count 1 secret allows is still there', async () => {
    expect((await put('limited/head', { value: 'read-me-once', max_access_count: 1 })).status).toBe(201);
    for (const url of [
      `/v1/vaults/${vaultId}/secrets/limited/head`,
      `/v1/vaults/${vaultId}/secret-version/limited/head/1`,
      `/v1/vaults/${vaultId}/env-vars/resolve`,
    ]) {
      const r = await fetch(`${mesh.baseUrl}${url}`, {
        method: 'HEAD',
        headers: { authorization: `Bearer ${owner.token}` },
      });
      expect({ url, status: r.status }).toEqual({ url, status: 405 });
      expect(r.headers.get('allow')).toContain('GET');
      expect(r.headers.get('allow')).not.toContain('HEAD');
    }
    // Another method's 405 does not advertise the HEAD these refuse.
    const post = await fetch(`${mesh.baseUrl}/v1/vaults/${vaultId}/secrets/limited/head`, {
      method: 'POST',
      headers: { authorization: `Bearer ${owner.token}` },
    });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).not.toContain('HEAD');
    const [row] = await sqlOn<{ access_count: string }>(
      mesh,
      `SELECT access_count FROM vault_crypto.secret_versions WHERE vault_id = $1 AND path = 'limited/head'`,
      [vaultId],
    );
    expect(row!.access_count).toBe('0');
    const read = await get('limited/head');
    expect({ status: read.status, value: read.body['value'] }).toEqual({
      status: 200,
      value: 'read-me-once',
    });
    expectProblem(await get('limited/head'), 410);
  });

  it('30 concurrent writes of a live path store 30 dense versions, each readable with its own value', async () => {
    expect((await put('busy/path', { value: 'v-0' })).status).toBe(201);
    const writes = await Promise.all(
      Array.from({ length: 30 }, (_, i) => put('busy/path', { value: `v-${i + 1}` })),
    );
    expect(writes.map((w) => w.status)).toEqual(writes.map(() => 201));
    const versions = writes.map((w) => w.body['version'] as number).sort((a, b) => a - b);
    expect(versions).toEqual(Array.from({ length: 30 }, (_, i) => i + 2));
    // Each answered version decrypts to the value its own request sent (AAD binds the version).
    for (const [i, w] of writes.entries()) {
      const r = await api(
        mesh,
        'GET',
        `/v1/vaults/${vaultId}/secret-version/busy/path/${w.body['version']}`,
        {
          token: owner.token,
        },
      );
      expect(r.status).toBe(200);
      expect(r.body['value']).toBe(`v-${i + 1}`);
    }
  });

  it('never stores the plaintext: the row holds ciphertext, IV, tag, wrapped key and KEK version', async () => {
    const plaintext = `canary-${Math.random().toString(36).slice(2)}-plaintext`;
    await put('canary/value', { type: 'password', value: plaintext });
    const [row] = await sqlOn<Record<string, unknown>>(
      mesh,
      `SELECT * FROM vault_crypto.secret_versions WHERE vault_id = $1 AND path = 'canary/value'`,
      [vaultId],
    );
    expect(row).toBeDefined();
    expect((row!['iv'] as Buffer).length).toBe(12);
    expect((row!['tag'] as Buffer).length).toBe(16);
    expect((row!['wrapped_data_key'] as Buffer).length).toBe(60);
    expect(row!['kek_version']).toBe(1);
    const needle = Buffer.from(plaintext);
    for (const value of Object.values(row!)) {
      const bytes = Buffer.isBuffer(value) ? value : Buffer.from(JSON.stringify(value ?? null));
      expect(bytes.includes(needle)).toBe(false);
    }
    const dump = await sqlOn<{ t: string }>(
      mesh,
      `SELECT row_to_json(s)::text AS t FROM vault_crypto.secret_versions s`,
    );
    expect(dump.some((d) => d.t.includes(plaintext))).toBe(false);
    const keys = await sqlOn<{ wrapped_key: Buffer }>(mesh, `SELECT wrapped_key FROM vault_crypto.org_keys`);
    expect(keys.length).toBeGreaterThan(0);
  });

  it('refuses a ciphertext swapped between two paths instead of revealing either value', async () => {
    await put('swap/a', { value: 'value-of-a' });
    await put('swap/b', { value: 'value-of-b' });
    await sqlOn(
      mesh,
      `UPDATE vault_crypto.secret_versions a
         SET ciphertext = b.ciphertext, iv = b.iv, tag = b.tag, wrapped_data_key = b.wrapped_data_key
        FROM vault_crypto.secret_versions b
       WHERE a.vault_id = $1 AND a.path = 'swap/a' AND b.vault_id = $1 AND b.path = 'swap/b'`,
      [vaultId],
    );
    const r = await get('swap/a');
    expect(r.status).toBe(500);
    expect(JSON.stringify(r.body)).not.toMatch(/value-of-/);
    expect((await get('swap/b')).body).toMatchObject({ value: 'value-of-b' });
    const logs = mesh.output.get('vault-crypto')!.join('\n');
    expect(logs).not.toMatch(/value-of-/);
  });

  it('rotates the org key on an admin’s demand without stranding old versions, re-wrapping lazily', async () => {
    const other = await quickUser(mesh);
    const v = await api(mesh, 'POST', '/v1/vaults', { token: other.token, body: { name: 'kek' } });
    const id = v.body['id'] as string;
    await api(mesh, 'PUT', `/v1/vaults/${id}/secrets/old`, { token: other.token, body: { value: 'before' } });
    const rotated = await api(mesh, 'POST', '/v1/org/encryption-key/rotate', {
      confirm: TEST_PASSWORD,
      token: other.token,
    });
    expect(rotated.status).toBe(200);
    expect(rotated.body).toEqual({ version: 2 });
    await api(mesh, 'PUT', `/v1/vaults/${id}/secrets/new`, { token: other.token, body: { value: 'after' } });
    const kekOf = async (path: string) =>
      (
        await sqlOn<{ kek_version: number }>(
          mesh,
          `SELECT kek_version FROM vault_crypto.secret_versions WHERE vault_id = $1 AND path = $2`,
          [id, path],
        )
      )[0]!.kek_version;
    expect(await kekOf('new')).toBe(2);
    expect(await kekOf('old')).toBe(1);
    const old = await api(mesh, 'GET', `/v1/vaults/${id}/secrets/old`, { token: other.token });
    expect(old.body).toMatchObject({ value: 'before' });
    // The first read after the rotation re-wraps the data key under version 2, in the background.
    for (let i = 0; i < 50 && (await kekOf('old')) !== 2; i += 1)
      await new Promise((r) => setTimeout(r, 100));
    expect(await kekOf('old')).toBe(2);
    const versions = await sqlOn(
      mesh,
      `SELECT version FROM vault_crypto.org_keys WHERE org_id = $1 ORDER BY version`,
      [other.orgId],
    );
    expect(versions).toEqual([{ version: 1 }, { version: 2 }]);
  });

  it('refuses secret reads without a passkey unlock when the user’s setting demands it', async () => {
    const u = await quickUser(mesh);
    const v = await api(mesh, 'POST', '/v1/vaults', { token: u.token, body: { name: 'pk' } });
    const id = v.body['id'] as string;
    await api(mesh, 'PUT', `/v1/vaults/${id}/secrets/k`, { token: u.token, body: { value: 'locked' } });
    // Passkeys (and so turning the setting on) come with their own issue: set it in the database.
    await sqlOn(mesh, `UPDATE identity.users SET require_passkey_for_vaults = true WHERE id = $1`, [
      u.userId,
    ]);
    const login = await api(mesh, 'POST', '/v1/auth/token', {
      body: { email: u.email, password: TEST_PASSWORD },
    });
    const token = login.body['access_token'] as string;
    const read = (headers: Record<string, string> = {}) =>
      fetch(`${mesh.baseUrl}/v1/vaults/${id}/secrets/k`, {
        headers: { authorization: `Bearer ${token}`, ...headers },
      });
    for (const r of [await read(), await read({ 'x-passkey-token': 'not-a-real-token' })]) {
      expect(r.status).toBe(403);
      const body = (await r.json()) as Record<string, unknown>;
      expect(body).toMatchObject({ status: 403, type: 'passkey_required' });
      expect(JSON.stringify(body)).not.toContain('locked');
    }
    // The old token (minted before the setting) still reads: the claim changes at the next sign-in.
    expect((await api(mesh, 'GET', `/v1/vaults/${id}/secrets/k`, { token: u.token })).body).toMatchObject({
      value: 'locked',
    });
    expect((await api(mesh, 'GET', `/v1/vaults/${id}/secrets`, { token })).status).toBe(200);
  });
});
