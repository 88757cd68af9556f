import { createHash, randomBytes } from 'node:crypto';
import { Metadata } from '@grpc/grpc-js';
import { NatsLink } from '@custos/events';
import { VaultCryptoServiceClient } from '@custos/proto/custos/vault_crypto/v1/service';
import { callUnary, createLogger } from '@custos/service-kit';
import { waitFor } from '@custos/service-kit/testing';
import { type SmtpCapture } from '@custos/testing';
import { TEST_PASSWORD, api, countStatuses, expectProblem, quickUser } from '../src/api';
import { sqlOn } from '../src/db';
import { SERVICES, sharedMail, sharedMesh, type Mesh } from '../src/mesh';
import { grpcClientAs } from '../src/mesh-grpc';

type User = Awaited<ReturnType<typeof quickUser>>;
type Reply = Awaited<ReturnType<typeof api>>;

const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';
const inHours = (h: number) => new Date(Date.now() + h * 3_600_000).toISOString();

describe('shares: links and grants of one secret version, and every way they refuse', () => {
  let mesh: Mesh;
  let smtp: SmtpCapture;

  beforeAll(async () => {
    // TRUSTED_PROXIES=127.0.0.1/32: the tests stand in for a proxy on loopback.
    mesh = await sharedMesh();
    smtp = sharedMail();
  });
  afterAll(async () => {
    await mesh?.stop();
    await smtp?.close();
  });

  /** Any request, with optional headers (X-Forwarded-For, X-Share-Passphrase). */
  async function call(
    method: string,
    path: string,
    opts: { token?: string; body?: unknown; headers?: Record<string, string> } = {},
  ): Promise<Reply> {
    const res = await fetch(`${mesh.baseUrl}${path}`, {
      method,
      headers: {
        ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
        ...opts.headers,
      },
      ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
    });
    const text = await res.text();
    return {
      status: res.status,
      body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
      headers: res.headers,
    };
  }

  /** A new org: its owner, a vault and a secret (two versions when `second` is given). */
  async function org(value = `v-${randomBytes(6).toString('hex')}`) {
    const owner = await quickUser(mesh);
    const v = await api(mesh, 'POST', '/v1/vaults', { token: owner.token, body: { name: 'shared' } });
    expect(v.status).toBe(201);
    const vaultId = v.body['id'] as string;
    const put = await api(mesh, 'PUT', `/v1/vaults/${vaultId}/secrets/app/db-password`, {
      token: owner.token,
      body: { type: 'password', value },
    });
    expect(put.status).toBe(201);
    return { owner, vaultId, secretId: put.body['id'] as string, value };
  }

  /** Invites a member into `inviter`'s org and signs them in. */
  async function member(inviter: User, role: 'member' | 'admin' = 'member'): Promise<User> {
    const email = `s-${randomBytes(4).toString('hex')}@example.com`;
    const r = await api(mesh, 'POST', '/v1/org/invite', { token: inviter.token, body: { email, role } });
    expect(r.status).toBe(200);
    const mail = await smtp.waitForMessage((m) => m.to === email, 10_000);
    const token = decodeURIComponent(/accept-invite\?token=(\S+)/.exec(mail.text)![1]!);
    const accepted = await api(mesh, 'POST', '/v1/org/invites/accept', {
      body: { token, password: TEST_PASSWORD },
    });
    expect(accepted.status).toBe(201);
    const login = await api(mesh, 'POST', '/v1/auth/token', { body: { email, password: TEST_PASSWORD } });
    return {
      email,
      token: login.body['access_token'] as string,
      userId: accepted.body['user_id'] as string,
      orgId: inviter.orgId,
    };
  }

  /** Registers an agent of `creator`'s org and exchanges its key for a JWT. */
  async function agent(creator: User): Promise<{ id: string; token: string }> {
    const created = await api(mesh, 'POST', '/v1/agents', {
      token: creator.token,
      body: { name: `bot-${randomBytes(3).toString('hex')}` },
    });
    expect(created.status).toBe(201);
    const id = (created.body['agent'] as { id: string }).id;
    const t = await api(mesh, 'POST', '/v1/auth/agent-token', {
      body: { agent_id: id, api_key: created.body['api_key'] },
    });
    expect(t.status).toBe(200);
    return { id, token: t.body['access_token'] as string };
  }

  /** The link secret of every share made here, by share id (from its share_url). */
  const linkKeys = new Map<string, string>();
  async function share(secretId: string, body: Record<string, unknown>, token: string): Promise<Reply> {
    const r = await call('POST', `/v1/secrets/${secretId}/share`, { token, body });
    if (r.status === 201) {
      const key = new URL(r.body['share_url'] as string).searchParams.get('key');
      expect(key).toMatch(/^[A-Za-z0-9_-]{43}$/);
      linkKeys.set(r.body['id'] as string, key!);
    }
    return r;
  }
  /** Opens a share by its full link (id and key); `key: ''` sends the id alone. */
  const open = (
    id: string,
    opts: { token?: string; passphrase?: string; ip?: string; key?: string } = {},
  ) => {
    const key = opts.key ?? linkKeys.get(id) ?? '';
    return call('GET', `/v1/share/${id}${key ? `?key=${encodeURIComponent(key)}` : ''}`, {
      ...(opts.token ? { token: opts.token } : {}),
      headers: {
        ...(opts.passphrase !== undefined ? { 'x-share-passphrase': opts.passphrase } : {}),
        ...(opts.ip ? { 'x-forwarded-for': opts.ip } : {}),
      },
    });
  };
  async function created(secretId: string, body: Record<string, unknown>, token: string): Promise<string> {
    const r = await share(secretId, { expires_at: inHours(1), ...body }, token);
    expect({ status: r.status, body: r.body }).toMatchObject({ status: 201 });
    return r.body['id'] as string;
  }

  /** The audit records vault-crypto wrote about a share, oldest first. */
  const audits = (shareId: string) =>
    sqlOn<{ payload: Record<string, unknown> }>(
      mesh,
      `SELECT payload FROM vault_crypto.outbox WHERE name = 'audit.recorded' AND payload->>'resource_id' = $1 ORDER BY seq`,
      [shareId],
    ).then((rows) => rows.map((r) => r.payload));

  async function expectNoValueInOutbox(...secrets: string[]) {
    const rows = await sqlOn<{ payload: unknown }>(mesh, 'SELECT payload FROM vault_crypto.outbox');
    const all = JSON.stringify(rows);
    for (const s of secrets) expect(all).not.toContain(s);
  }

  it('shares a pinned version by link: reveals it max_access_count times, then 410, all audited', async () => {
    const o = await org();
    const r = await share(
      o.secretId,
      { recipient_type: 'anyone_with_link', expires_at: inHours(2), max_access_count: 2 },
      o.owner.token,
    );
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({
      id: expect.any(String),
      secret_id: o.secretId,
      vault_id: o.vaultId,
      secret_path: 'app/db-password',
      recipient_type: 'anyone_with_link',
      recipient_email: null,
      max_access_count: 2,
      access_count: 0,
      has_passphrase: false,
      is_revoked: false,
    });
    const id = r.body['id'] as string;
    expect(r.body['share_url']).toBe(`${mesh.baseUrl}/v1/share/${id}?key=${linkKeys.get(id)!}`);
    expect(JSON.stringify(r.body)).not.toContain(o.value);

    // A later PUT does not change what the share reveals: it pins the version it was made from.
    await api(mesh, 'PUT', `/v1/vaults/${o.vaultId}/secrets/app/db-password`, {
      token: o.owner.token,
      body: { value: 'newer-value' },
    });
    const first = await open(id);
    expect(first.status).toBe(200);
    expect(first.headers.get('cache-control')).toBe('no-store');
    expect(first.body).toMatchObject({
      id: o.secretId,
      share_id: id,
      path: 'app/db-password',
      type: 'password',
      version: 1,
      value: o.value,
      value_encoding: 'utf8',
      access_count: 1,
      max_access_count: 2,
    });
    expect((await open(id)).body).toMatchObject({ value: o.value, access_count: 2 });
    expectProblem(await open(id), 410);

    const out = await call('GET', '/v1/shares/outbound', { token: o.owner.token });
    expect(out.status).toBe(200);
    expect(out.body['shares']).toEqual([
      expect.objectContaining({
        id,
        secret_path: 'app/db-password',
        access_count: 2,
        max_access_count: 2,
        is_expired: false,
      }),
    ]);

    const records = await audits(id);
    expect(records.map((a) => a['action'])).toEqual([
      'share.created',
      'share.accessed',
      'share.accessed',
      'share.access_denied',
    ]);
    expect(records[0]).toMatchObject({
      org_id: o.owner.orgId,
      actor_type: 'user',
      actor_id: o.owner.userId,
      resource_type: 'share',
      metadata: expect.objectContaining({
        secret_version_id: o.secretId,
        recipient_type: 'anyone_with_link',
      }),
    });
    expect(records[1]).toMatchObject({
      actor_type: 'anonymous',
      actor_id: null,
      metadata: expect.objectContaining({ access_count: 1 }),
    });
    expect(records[3]).toMatchObject({ metadata: expect.objectContaining({ reason: 'exhausted' }) });
    await expectNoValueInOutbox(o.value);
  });

  it('refuses bad bodies with 400 naming the field, and answers 401, 403 and 404 where they apply', async () => {
    const o = await org();
    const bad: Array<[Record<string, unknown>, string]> = [
      [{ expires_at: inHours(1) }, 'recipient_type'],
      [{ recipient_type: 'friends', expires_at: inHours(1) }, 'recipient_type'],
      [{ recipient_type: 'anyone_with_link' }, 'expires_at'],
      [{ recipient_type: 'anyone_with_link', expires_at: '2001-01-01T00:00:00Z' }, 'expires_at'],
      [{ recipient_type: 'anyone_with_link', expires_at: inHours(24 * 31) }, 'expires_at'],
      [
        { recipient_type: 'anyone_with_link', expires_at: inHours(1), max_access_count: 0 },
        'max_access_count',
      ],
      [
        { recipient_type: 'anyone_with_link', expires_at: inHours(1), max_access_count: 5000 },
        'max_access_count',
      ],
      [{ recipient_type: 'external_email', expires_at: inHours(1) }, 'email'],
      [{ recipient_type: 'external_email', email: 'nobody', expires_at: inHours(1) }, 'email'],
      [{ recipient_type: 'user', expires_at: inHours(1) }, 'recipient_id'],
      [{ recipient_type: 'anyone_with_link', expires_at: inHours(1), passphrase: 'short' }, 'passphrase'],
      [
        { recipient_type: 'anyone_with_link', expires_at: inHours(1), ip_allowlist: ['10.0.0.300'] },
        'ip_allowlist',
      ],
      [{ recipient_type: 'anyone_with_link', expires_at: inHours(1), permissions: ['write'] }, 'permissions'],
      [{ recipient_type: 'anyone_with_link', expires_at: inHours(1), colour: 'red' }, 'colour'],
    ];
    for (const [body, field] of bad)
      expectProblem(await share(o.secretId, body, o.owner.token), 400, { field });

    const link = { recipient_type: 'anyone_with_link', expires_at: inHours(1) };
    expectProblem(await share(o.secretId, link, ''), 401);
    expectProblem(await share(UNKNOWN_ID, link, o.owner.token), 404);
    expectProblem(await share('not-a-uuid', link, o.owner.token), 404);
    const stranger = await quickUser(mesh);
    expectProblem(await share(o.secretId, link, stranger.token), 404);
    // A member without a grant on the path may not read it, so may not share it.
    const m = await member(o.owner);
    expectProblem(await share(o.secretId, link, m.token), 403);
    expectProblem(await open(UNKNOWN_ID), 404);
    expectProblem(await open('nope'), 404);
    expect((await call('GET', '/v1/shares/outbound', { token: o.owner.token })).body).toEqual({ shares: [] });
    expectProblem(await call('GET', '/v1/shares/inbound'), 401);
  });

  it('locks a passphrase share after 5 wrong passphrases, however many are tried at once', async () => {
    const o = await org();
    const passphrase = `pass-${randomBytes(4).toString('hex')}`;
    const id = await created(
      o.secretId,
      { recipient_type: 'anyone_with_link', passphrase, max_access_count: 5 },
      o.owner.token,
    );
    expectProblem(await open(id), 403, { type: 'passphrase_required' });
    expectProblem(await open(id, { passphrase: 'wrong-one' }), 403, { type: 'passphrase_invalid' });
    const right = await open(id, { passphrase });
    expect(right.status).toBe(200);
    expect(right.body['value']).toBe(o.value);

    const tries = await Promise.all(Array.from({ length: 8 }, () => open(id, { passphrase: 'also-wrong' })));
    // One wrong passphrase was spent before: four more are evaluated, the rest find the share locked.
    expect(countStatuses(tries)).toEqual({ 403: 4, 410: 4 });
    expect(tries.filter((t) => t.status === 403 && t.body['type'] === 'passphrase_invalid')).toHaveLength(4);
    expect(tries.filter((t) => t.status === 410)).toHaveLength(4);
    expectProblem(await open(id, { passphrase }), 410);

    const reasons = (await audits(id)).map(
      (a) => (a['metadata'] as Record<string, unknown>)['reason'] ?? a['action'],
    );
    expect(reasons.filter((r) => r === 'passphrase_invalid')).toHaveLength(5);
    expect(reasons).toContain('passphrase_missing');
    expect(reasons).toContain('locked');
    expect(reasons.filter((r) => r === 'share.accessed')).toHaveLength(1);
    const stored = await sqlOn<{ passphrase_hash: string }>(
      mesh,
      'SELECT passphrase_hash FROM vault_crypto.shares WHERE id = $1',
      [id],
    );
    expect(stored[0]!.passphrase_hash).toMatch(/^scrypt\$/);
    await expectNoValueInOutbox(o.value, passphrase);
  });

  it("opens only from the share's IP allowlist (the client address, after trusted proxies)", async () => {
    const o = await org();
    const id = await created(
      o.secretId,
      {
        recipient_type: 'anyone_with_link',
        ip_allowlist: ['203.0.113.0/24', '2001:db8::1'],
        max_access_count: 3,
      },
      o.owner.token,
    );
    expectProblem(await open(id, { ip: '198.51.100.1' }), 403, { type: 'ip_denied' });
    expectProblem(await open(id), 403, { type: 'ip_denied' });
    expect((await open(id, { ip: '203.0.113.77' })).body).toMatchObject({ value: o.value, access_count: 1 });
    expect((await open(id, { ip: '2001:db8::1' })).status).toBe(200);
    const denied = (await audits(id)).filter((a) => a['action'] === 'share.access_denied');
    expect(denied).toHaveLength(2);
    expect(denied[0]).toMatchObject({
      client_ip: '198.51.100.1',
      metadata: expect.objectContaining({ reason: 'ip_not_allowed' }),
    });
  });

  it('mails an external_email share over SMTP; agents may not make external or link shares', async () => {
    const o = await org();
    const email = `ext-${randomBytes(4).toString('hex')}@elsewhere.example`;
    const r = await share(
      o.secretId,
      {
        recipient_type: 'external_email',
        email: email.toUpperCase(),
        expires_at: inHours(3),
        max_access_count: 2,
      },
      o.owner.token,
    );
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ recipient_type: 'external_email', recipient_email: email });
    const id = r.body['id'] as string;
    const creatorKey = linkKeys.get(id)!;
    const mail = await smtp.waitForMessage((m) => m.to === email, 15_000);
    expect(mail.subject).toBe('A secret was shared with you');
    expect(mail.text).not.toContain(o.value);
    // The mailed link carries a secret of its own, issued to identity as it sent the mail.
    const mailKey = decodeURIComponent(
      new RegExp(`https://custos\\.test/v1/share/${id}\\?key=(\\S+)`).exec(mail.text)![1]!,
    );
    expect(mailKey).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(mailKey).not.toBe(creatorKey);
    expectProblem(await open(id, { key: '' }), 404);
    // Both links open it, counted together (max_access_count 2).
    expect((await open(id, { key: mailKey })).body).toMatchObject({ value: o.value });
    expect((await open(id, { key: creatorKey })).body).toMatchObject({ value: o.value });
    expectProblem(await open(id, { key: mailKey }), 410);

    // The event names the share only: no link secret, no address — in the outbox and in JetStream.
    const events = await sqlOn<{ payload: Record<string, unknown> }>(
      mesh,
      `SELECT payload FROM vault_crypto.outbox WHERE name = 'share.email_requested' AND payload->>'share_id' = $1`,
      [id],
    );
    expect(events).toHaveLength(1);
    expect(Object.keys(events[0]!.payload).sort()).toEqual(['created_by', 'created_by_type', 'share_id']);
    const streamed = await streamedMessages(`${mesh.env['NATS_SUBJECT_PREFIX']!}.share.email_requested`);
    const ours = streamed.filter((m) => m.includes(id));
    expect(ours).toHaveLength(1);
    for (const canary of [mailKey, creatorKey, email, o.value]) expect(ours[0]).not.toContain(canary);
    const issued = (await audits(id)).filter((a) => a['action'] === 'share.mail_link_issued');
    expect(issued).toEqual([expect.objectContaining({ actor_type: 'system', resource_id: id })]);

    const bot = await agent(o.owner);
    const v = await api(mesh, 'POST', '/v1/vaults', { token: bot.token, body: { name: 'bot-vault' } });
    const put = await api(mesh, 'PUT', `/v1/vaults/${v.body['id'] as string}/secrets/k`, {
      token: bot.token,
      body: { value: 'bot-value' },
    });
    const botSecret = put.body['id'] as string;
    expectProblem(
      await share(botSecret, { recipient_type: 'external_email', email, expires_at: inHours(1) }, bot.token),
      403,
    );
    expectProblem(
      await share(botSecret, { recipient_type: 'anyone_with_link', expires_at: inHours(1) }, bot.token),
      403,
    );

    // `creator` from an agent names the user who registered it; only that user's token opens it.
    const toCreator = await share(
      botSecret,
      { recipient_type: 'creator', expires_at: inHours(1) },
      bot.token,
    );
    expect(toCreator.status).toBe(201);
    expect(toCreator.body).toMatchObject({
      recipient_type: 'creator',
      recipient_id: o.owner.userId,
      created_by_type: 'agent',
    });
    const cid = toCreator.body['id'] as string;
    expectProblem(await open(cid), 401);
    expectProblem(await open(cid, { token: bot.token }), 403);
    expect((await open(cid, { token: o.owner.token })).body).toMatchObject({ value: 'bot-value' });
    const inbound = await call('GET', '/v1/shares/inbound', { token: o.owner.token });
    expect(inbound.body['shares']).toEqual([expect.objectContaining({ id: cid, created_by: bot.id })]);
    expect((await call('GET', '/v1/shares/outbound', { token: bot.token })).body['shares']).toEqual([
      expect.objectContaining({ id: cid }),
    ]);
    const accessed = (await audits(cid)).find((a) => a['action'] === 'share.accessed');
    expect(accessed).toMatchObject({ actor_type: 'user', actor_id: o.owner.userId });
  });

  it('lets only the named recipient open, accept and decline a user share', async () => {
    const o = await org();
    const bob = await member(o.owner);
    const id = await created(
      o.secretId,
      { recipient_type: 'user', recipient_id: bob.userId, max_access_count: 3 },
      o.owner.token,
    );
    expectProblem(await open(id), 401);
    expectProblem(await open(id, { token: o.owner.token }), 403);
    expectProblem(await open(id, { token: 'not.a.jwt' }), 401);
    expect((await open(id, { token: bob.token })).body).toMatchObject({ value: o.value });

    expect((await call('GET', '/v1/shares/inbound', { token: bob.token })).body['shares']).toEqual([
      expect.objectContaining({ id, recipient_type: 'user', recipient_id: bob.userId, is_accepted: false }),
    ]);
    expect((await call('GET', '/v1/shares/inbound', { token: o.owner.token })).body).toEqual({ shares: [] });
    expectProblem(await call('POST', `/v1/shares/${id}/accept`, { token: o.owner.token }), 403);
    expectProblem(await call('POST', `/v1/shares/${UNKNOWN_ID}/accept`, { token: bob.token }), 404);
    expect((await call('POST', `/v1/shares/${id}/accept`, { token: bob.token })).status).toBe(204);
    expect((await call('POST', `/v1/shares/${id}/accept`, { token: bob.token })).status).toBe(204);
    expect((await call('GET', '/v1/shares/inbound', { token: bob.token })).body['shares']).toEqual([
      expect.objectContaining({ id, is_accepted: true, is_declined: false }),
    ]);
    expect((await call('POST', `/v1/shares/${id}/decline`, { token: bob.token })).status).toBe(204);
    expectProblem(await open(id, { token: bob.token }), 410);
    expectProblem(await call('POST', `/v1/shares/${id}/accept`, { token: bob.token }), 409);
    expect((await audits(id)).map((a) => a['action'])).toEqual([
      'share.created',
      'share.access_denied',
      'share.access_denied',
      'share.accessed',
      'share.accepted',
      'share.declined',
      'share.access_denied',
    ]);
    const stranger = await quickUser(mesh);
    expectProblem(await call('POST', `/v1/shares/${id}/decline`, { token: stranger.token }), 404);

    // A share revoked before the recipient decided cannot be accepted any more.
    const later = await created(
      o.secretId,
      { recipient_type: 'user', recipient_id: bob.userId },
      o.owner.token,
    );
    expect((await call('DELETE', `/v1/share/${later}`, { token: o.owner.token })).status).toBe(204);
    expectProblem(await call('POST', `/v1/shares/${later}/accept`, { token: bob.token }), 410);
    expect((await call('GET', '/v1/shares/inbound', { token: bob.token })).body['shares']).toEqual([
      expect.objectContaining({ id, is_declined: true }),
    ]);
  });

  it('is revoked by its creator or an org admin, not by another member; revoked and expired shares are 410', async () => {
    const o = await org();
    const carol = await member(o.owner);
    const admin = await member(o.owner, 'admin');
    const id1 = await created(
      o.secretId,
      { recipient_type: 'anyone_with_link', max_access_count: 5 },
      o.owner.token,
    );
    const id2 = await created(
      o.secretId,
      { recipient_type: 'anyone_with_link', max_access_count: 5 },
      o.owner.token,
    );
    expectProblem(await call('DELETE', `/v1/share/${id1}`, { token: carol.token }), 403);
    expectProblem(await call('DELETE', `/v1/share/${id1}`), 401);
    expectProblem(await call('DELETE', `/v1/share/${id1}`, { token: (await quickUser(mesh)).token }), 404);
    expect((await call('DELETE', `/v1/share/${id1}`, { token: o.owner.token })).status).toBe(204);
    expect((await call('DELETE', `/v1/share/${id1}`, { token: o.owner.token })).status).toBe(204);
    expectProblem(await open(id1), 410);
    expect((await call('DELETE', `/v1/share/${id2}`, { token: admin.token })).status).toBe(204);
    expectProblem(await open(id2), 410);
    expect((await audits(id1)).map((a) => a['action'])).toEqual([
      'share.created',
      'share.revoked',
      'share.access_denied',
    ]);
    expect((await audits(id2))[1]).toMatchObject({ action: 'share.revoked', actor_id: admin.userId });
    const listed = (await call('GET', '/v1/shares/outbound', { token: o.owner.token })).body[
      'shares'
    ] as Array<Record<string, unknown>>;
    expect(listed.every((s) => s['is_revoked'] === true)).toBe(true);

    const id3 = await created(o.secretId, { recipient_type: 'anyone_with_link' }, o.owner.token);
    await sqlOn(
      mesh,
      `UPDATE vault_crypto.shares SET expires_at = now() - interval '1 second' WHERE id = $1`,
      [id3],
    );
    expectProblem(await open(id3), 410);
    expect(
      (await call('GET', '/v1/shares/outbound', { token: o.owner.token })).body['shares'],
    ).toContainEqual(expect.objectContaining({ id: id3, is_expired: true }));
    // A share of a version that was deleted afterwards no longer opens either.
    const id4 = await created(o.secretId, { recipient_type: 'anyone_with_link' }, o.owner.token);
    await api(mesh, 'DELETE', `/v1/vaults/${o.vaultId}/secrets/app/db-password`, { token: o.owner.token });
    expectProblem(await open(id4), 410);
    expectProblem(
      await share(o.secretId, { recipient_type: 'anyone_with_link', expires_at: inHours(1) }, o.owner.token),
      404,
    );
  });

  it('allows 10 share creations a minute per org, then 429 with Retry-After', async () => {
    const o = await org();
    const body = { recipient_type: 'anyone_with_link', expires_at: inHours(1) };
    for (let i = 0; i < 10; i += 1) expect((await share(o.secretId, body, o.owner.token)).status).toBe(201);
    const eleventh = await share(o.secretId, body, o.owner.token);
    expectProblem(eleventh, 429);
    const wait = Number(eleventh.headers.get('retry-after'));
    expect(wait).toBeGreaterThanOrEqual(1);
    expect(wait).toBeLessThanOrEqual(60);
    // Another org has its own budget.
    const other = await org();
    expect((await share(other.secretId, body, other.owner.token)).status).toBe(201);
  });

  it('holds parallel creations to the limit too', async () => {
    const o = await org();
    const body = { recipient_type: 'anyone_with_link', expires_at: inHours(1) };
    const replies = await Promise.all(
      Array.from({ length: 16 }, () => share(o.secretId, body, o.owner.token)),
    );
    expect(replies.filter((r) => r.status === 201)).toHaveLength(10);
    const limited = replies.filter((r) => r.status === 429);
    expect(limited).toHaveLength(6);
    for (const r of limited) expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const rows = await sqlOn<{ n: string }>(
      mesh,
      'SELECT count(*) AS n FROM vault_crypto.shares WHERE org_id = $1',
      [o.owner.orgId],
    );
    expect(Number(rows[0]!.n)).toBe(10);
  });

  it('opens only with the full link: the id alone or another key opens nothing; the secret is stored nowhere, logged nowhere', async () => {
    const o = await org();
    const r = await share(
      o.secretId,
      { recipient_type: 'anyone_with_link', expires_at: inHours(1) },
      o.owner.token,
    );
    expect(r.status).toBe(201);
    const id = r.body['id'] as string;
    const url = r.body['share_url'] as string;
    const key = linkKeys.get(id)!;
    const other = await created(o.secretId, { recipient_type: 'anyone_with_link' }, o.owner.token);

    // The id alone, a wrong key and another share's key: 404, as an unknown share, and not counted.
    const bare = await open(id, { key: '' });
    expectProblem(bare, 404);
    expect(JSON.stringify(bare.body)).not.toContain(id);
    expectProblem(await open(id, { key: `${key.slice(0, -1)}${key.endsWith('A') ? 'B' : 'A'}` }), 404);
    expectProblem(await open(id, { key: linkKeys.get(other)! }), 404);
    expectProblem(await open(id, { key: 'short' }), 404);
    expect(
      (
        await sqlOn<{ access_count: number }>(
          mesh,
          'SELECT access_count FROM vault_crypto.shares WHERE id = $1',
          [id],
        )
      )[0],
    ).toEqual({ access_count: 0 });

    // The full link, as returned, opens it once (max_access_count 1), then 410.
    const opened = await fetch(url);
    expect(opened.status).toBe(200);
    expect(await opened.json()).toMatchObject({ share_id: id, value: o.value, access_count: 1 });
    expectProblem(await open(id), 410);
    // The key may also travel in X-Share-Key (a header, never in a URL).
    const viaHeader = await call('GET', `/v1/share/${other}`, {
      headers: { 'x-share-key': linkKeys.get(other)! },
    });
    expect(viaHeader.body).toMatchObject({ share_id: other, value: o.value });

    // No text, bytea or jsonb column of vault-crypto's schema holds the secret (as text, or its
    // 32 bytes), for this share or the other one.
    const cols = await sqlOn<{ table_name: string; column_name: string; data_type: string }>(
      mesh,
      `SELECT table_name, column_name, data_type FROM information_schema.columns
       WHERE table_schema = 'vault_crypto' AND data_type IN ('text', 'character varying', 'bytea', 'jsonb', 'json')`,
    );
    expect(cols.some((c) => c.table_name === 'shares' && c.column_name === 'secret_hash')).toBe(true);
    expect(cols.some((c) => c.data_type === 'bytea')).toBe(true);
    for (const k of [key, linkKeys.get(other)!]) {
      const raw = Buffer.from(k, 'base64url');
      expect(raw).toHaveLength(32);
      for (const c of cols) {
        const q =
          c.data_type === 'bytea'
            ? `SELECT count(*)::int AS n FROM vault_crypto."${c.table_name}" WHERE position($1::bytea IN "${c.column_name}") > 0 OR position($2::bytea IN "${c.column_name}") > 0`
            : `SELECT count(*)::int AS n FROM vault_crypto."${c.table_name}" WHERE position($1::text IN "${c.column_name}"::text) > 0 OR position($2::text IN "${c.column_name}"::text) > 0`;
        const params = c.data_type === 'bytea' ? [raw, Buffer.from(k, 'utf8')] : [k, raw.toString('hex')];
        const [row] = await sqlOn<{ n: number }>(mesh, q, params);
        expect({ column: `${c.table_name}.${c.column_name}`, n: row!.n }).toEqual({
          column: `${c.table_name}.${c.column_name}`,
          n: 0,
        });
      }
    }

    // The gateway's access log shows share paths redacted; no log line of any service holds the
    // link secret or the share's path.
    await new Promise((res) => setTimeout(res, 500));
    const logs = [...SERVICES].flatMap((svc) => mesh.output.get(svc) ?? []).join('\n');
    expect(logs).toContain('/v1/share/[redacted]');
    for (const secret of [key, linkKeys.get(other)!, `/v1/share/${id}`, `/v1/share/${other}`]) {
      expect(logs).not.toContain(secret);
    }
  });

  /** Runs `fn` with a JetStream connection of the mesh's NATS test user. */
  async function withNats<T>(fn: (nats: NonNullable<Awaited<ReturnType<NatsLink['ready']>>>) => Promise<T>) {
    const login = mesh.nats?.testUser;
    if (!login) throw new Error('the mesh runs no nats-server of its own (mesh.nats is missing)');
    const link = new NatsLink(
      [mesh.nats!.url],
      { stream: mesh.env['NATS_STREAM']!, subjectPrefix: mesh.env['NATS_SUBJECT_PREFIX']! },
      createLogger({ service: 'shares-e2e', level: 'silent' }),
      'shares-e2e',
      { user: login.user, password: login.password },
    );
    link.start();
    try {
      await waitFor(async () => (await link.ready().catch(() => undefined)) !== undefined, 20_000);
      return await fn((await link.ready())!);
    } finally {
      await link.close();
    }
  }

  /** The raw bodies of every message the stream holds on `subject`, oldest first. */
  const streamedMessages = (subject: string) =>
    withNats(async ({ js, jsm }) => {
      const stream = mesh.env['NATS_STREAM']!;
      const pending =
        (await jsm.streams.info(stream, { subjects_filter: subject })).state.subjects?.[subject] ?? 0;
      if (pending === 0) return [];
      // One subject as a string: NATS 2.9 takes no list.
      const consumer = await js.consumers.get(stream, { filter_subjects: subject });
      const bodies: string[] = [];
      const batch = await consumer.fetch({ max_messages: pending, expires: 5000 });
      for await (const m of batch) {
        bodies.push(m.string());
        if (bodies.length === pending) break;
      }
      await consumer.delete().catch(() => undefined);
      return bodies;
    });

  it('keeps share mail requests (and every event) in JetStream at most NATS_STREAM_MAX_AGE_HOURS (default 7 days)', async () => {
    await withNats(async ({ jsm }) => {
      const c = (await jsm.streams.info(mesh.env['NATS_STREAM']!)).config;
      // The services created the stream: 168 h in nanoseconds.
      expect(c.max_age).toBe(168 * 3600 * 1e9);
      expect(c.deny_delete && c.deny_purge).toBe(true);
    });
  });

  it('issues the mailed link to identity alone, once per mail: a new issue ends the earlier link', async () => {
    const o = await org();
    const email = `re-${randomBytes(4).toString('hex')}@elsewhere.example`;
    const id = await created(
      o.secretId,
      { recipient_type: 'external_email', email, max_access_count: 3 },
      o.owner.token,
    );
    const mail = await smtp.waitForMessage((m) => m.to === email, 15_000);
    const mailed = decodeURIComponent(/\?key=(\S+)/.exec(mail.text)![1]!);
    const asIdentity = grpcClientAs(mesh, 'identity', VaultCryptoServiceClient, 'vault-crypto');
    const asGateway = grpcClientAs(mesh, 'gateway', VaultCryptoServiceClient, 'vault-crypto');
    const issue = (c: typeof asIdentity, shareId: string, orgId: string) =>
      callUnary(c.client, c.client.issueShareMailLink, { shareId, orgId }, new Metadata());
    try {
      // What a redelivered event would do: a second mail's secret, and the first link stops opening.
      const again = await issue(asIdentity, id, o.owner.orgId);
      expect(again).toMatchObject({ email, maxAccessCount: '3', passphraseProtected: false });
      expect(again.linkSecret).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(again.linkSecret).not.toBe(mailed);
      expectProblem(await open(id, { key: mailed }), 404);
      expect((await open(id, { key: again.linkSecret })).body).toMatchObject({ value: o.value });
      // The creator's link is untouched.
      expect((await open(id)).body).toMatchObject({ value: o.value });

      // No one else may mint one: the gateway (any HTTP request) is refused by the allow-list.
      await expect(issue(asGateway, id, o.owner.orgId)).rejects.toMatchObject({ kind: 'permission_denied' });
      // Another org, an unknown share, a share that is not an e-mail share: 404.
      const other = await org();
      await expect(issue(asIdentity, id, other.owner.orgId)).rejects.toMatchObject({ kind: 'not_found' });
      await expect(issue(asIdentity, UNKNOWN_ID, o.owner.orgId)).rejects.toMatchObject({ kind: 'not_found' });
      const link = await created(o.secretId, { recipient_type: 'anyone_with_link' }, o.owner.token);
      await expect(issue(asIdentity, link, o.owner.orgId)).rejects.toMatchObject({ kind: 'not_found' });
      // A revoked share has nothing to mail (identity then drops the event).
      expect((await call('DELETE', `/v1/share/${id}`, { token: o.owner.token })).status).toBe(204);
      await expect(issue(asIdentity, id, o.owner.orgId)).rejects.toMatchObject({ kind: 'gone' });
      expectProblem(await open(id, { key: again.linkSecret }), 410);
      const issued = (await audits(id)).filter((a) => a['action'] === 'share.mail_link_issued');
      expect(issued).toHaveLength(2);
      const stored = await sqlOn<{ mail_secret_hash: Buffer }>(
        mesh,
        'SELECT mail_secret_hash FROM vault_crypto.shares WHERE id = $1',
        [id],
      );
      expect(stored[0]!.mail_secret_hash.equals(createHash('sha256').update(again.linkSecret).digest())).toBe(
        true,
      );
    } finally {
      asIdentity.close();
      asGateway.close();
    }
  });

  it('reveals a max_access_count 1 share exactly once to 100 parallel opens', async () => {
    const o = await org();
    const id = await created(
      o.secretId,
      { recipient_type: 'anyone_with_link', max_access_count: 1 },
      o.owner.token,
    );
    // A HEAD (a link checker, a chat preview) is refused and spends nothing.
    const head = await fetch(`${mesh.baseUrl}/v1/share/${id}?key=${encodeURIComponent(linkKeys.get(id)!)}`, {
      method: 'HEAD',
    });
    expect(head.status).toBe(405);
    const replies = await Promise.all(Array.from({ length: 100 }, () => open(id)));
    const revealed = replies.filter((r) => r.status === 200);
    expect(revealed).toHaveLength(1);
    expect(revealed[0]!.body['value']).toBe(o.value);
    expect(replies.filter((r) => r.status === 410)).toHaveLength(99);
    const rows = await sqlOn<{ access_count: number }>(
      mesh,
      'SELECT access_count FROM vault_crypto.shares WHERE id = $1',
      [id],
    );
    expect(rows[0]!.access_count).toBe(1);
    const records = await audits(id);
    expect(records.filter((a) => a['action'] === 'share.accessed')).toHaveLength(1);
    expect(records.filter((a) => a['action'] === 'share.access_denied')).toHaveLength(99);
    await expectNoValueInOutbox(o.value);
  });
});
