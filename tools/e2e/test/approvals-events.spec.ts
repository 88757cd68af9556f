import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { JsonRpcProvider } from 'ethers';
import { startMeshAnvil } from '@custos/mesh';
import { waitFor } from '@custos/service-kit/testing';
import type { SmtpCapture } from '@custos/testing';
import { api, expectProblem, quickUser } from '../src/api';
import {
  ETH,
  type Received,
  anvilAgent,
  anvilOf,
  auditRecords,
  decide,
  execute,
  getApproval,
  randomAddress,
  settledNonce,
  submitTx,
  webhookReceiver,
} from '../src/approvals';
import { type MailSpool, readMailSpool, startMailSpool } from '../src/mail-spool';
import { invitedMember } from '../src/members';
import { type Mesh, startMesh } from '../src/mesh';
import { SMTP_PASSWORD, SMTP_USER } from '../src/profiles';

// Issue 19: approval events reach a webhook, signed; approvals expire (a rule's expiry_secs, swept
// by the approvals service) and an expired one is never used. A private mesh: the webhook
// dispatcher must be allowed to deliver to loopback. The expiring approvals are made first (the
// shortest expiry a rule takes is 60 s) and the webhook test runs while they age.

type User = Awaited<ReturnType<typeof quickUser>>;
type Body = Record<string, unknown>;

const EXPIRY_SECS = 60;

describe('approvals: events to webhooks, and expiry (private mesh)', () => {
  let mesh: Mesh;
  let anvil: Awaited<ReturnType<typeof startMeshAnvil>>;
  let chain: JsonRpcProvider;
  let receiver: Awaited<ReturnType<typeof webhookReceiver>>;
  let spool: MailSpool;
  let smtp: SmtpCapture;
  let spoolDir: string;
  let expiring: Awaited<ReturnType<typeof startExpiring>>;

  /**
   * An agent whose rules give 60 s to decide and use: a transaction held and approved at once (so
   * only the clock stops its resume), a requested approval nobody decides, and a consensus one
   * nobody votes on (its expiry is a `pending_approval.expired` event, to a webhook of the org).
   */
  async function startExpiring() {
    const owner = await quickUser(mesh);
    const hookPath = `/expiry-${randomBytes(3).toString('hex')}`;
    const hook = await api(mesh, 'POST', '/v1/webhooks', {
      token: owner.token,
      body: { url: `http://127.0.0.2:${receiver.port}${hookPath}`, events: ['pending_approval.expired'] },
    });
    expect({ status: hook.status, body: hook.body }).toMatchObject({ status: 201 });
    const agent = await anvilAgent(mesh, owner, {
      action_approval_policy: {
        rules: [
          {
            conditions: [{ type: 'value_above', threshold_wei: String(ETH / 10n) }],
            risk_tier: 1,
            expiry_secs: EXPIRY_SECS,
          },
          {
            conditions: [{ type: 'action_in', actions: ['docs.publish'] }],
            risk_tier: 1,
            expiry_secs: EXPIRY_SECS,
          },
          {
            conditions: [{ type: 'action_in', actions: ['treasury.move'] }],
            risk_tier: 1,
            expiry_secs: EXPIRY_SECS,
            approval: { min_approvals: 2 },
          },
        ],
      },
    });
    await chain.send('anvil_setBalance', [agent.address, `0x${(100n * ETH).toString(16)}`]);
    const to = randomAddress();
    const body = { chain: 'anvil', to, value: '1.0' };
    const held = await submitTx(mesh, agent, body);
    expect({ status: held.status, body: held.body }).toMatchObject({
      status: 202,
      body: { status: 'awaiting_approval' },
    });
    const approvalId = held.body['approval_id'] as string;
    const approved = await decide(mesh, owner.token, approvalId, 'approve');
    expect({ status: approved.status, body: approved.body }).toMatchObject({
      status: 200,
      body: { status: 'approved' },
    });
    const asked = await api(mesh, 'POST', '/v1/approvals/request', {
      token: agent.token,
      body: { action: 'docs.publish', target_type: 'doc', target_id: 'd-1', summary: { title: 'Publish' } },
    });
    expect(asked.status).toBe(202);
    const consensus = await api(mesh, 'POST', '/v1/approvals/request', {
      token: agent.token,
      body: {
        action: 'treasury.move',
        target_type: 'transfer',
        target_id: 't-9',
        summary: { title: 'Move' },
      },
    });
    expect({ status: consensus.status, body: consensus.body }).toMatchObject({
      status: 202,
      body: { kind: 'consensus', status: 'pending' },
    });
    return {
      owner,
      hookPath,
      consensusId: consensus.body['id'] as string,
      agent,
      to,
      body,
      txId: held.body['id'] as string,
      approvalId,
      pendingId: asked.body['id'] as string,
      approved: approved.body,
      pending: asked.body,
      consensus: consensus.body,
    };
  }

  beforeAll(async () => {
    anvil = await startMeshAnvil();
    receiver = await webhookReceiver('127.0.0.2');
    spoolDir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-e2e-approvals-mail-'));
    spool = await startMailSpool(spoolDir);
    const smtpUrl = spool.url(SMTP_USER, SMTP_PASSWORD);
    smtp = readMailSpool(spoolDir, { port: spool.port, url: smtpUrl });
    mesh = await startMesh({
      extraEnv: {
        EMAIL_VERIFICATION_REQUIRED: 'false',
        SMTP_URL: smtpUrl,
        SMTP_ALLOW_INSECURE: 'true',
        PUBLIC_BASE_URL: 'https://custos.test',
        LOCAL_EVM_RPC_URL: anvil.url,
        TX_WATCH_INTERVAL_MS: '100',
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOWED_CIDRS: '127.0.0.2/32',
        WEBHOOK_WORKER_INTERVAL_MS: '40',
        APPROVAL_SWEEP_INTERVAL_MS: '500',
      },
    });
    chain = anvilOf(mesh);
    expiring = await startExpiring();
  }, 120_000);
  afterAll(async () => {
    chain?.destroy();
    await mesh?.stop();
    await receiver?.close();
    await spool?.close();
    await anvil?.stop();
    if (spoolDir) fs.rmSync(spoolDir, { recursive: true, force: true });
  });

  /** Invites `role` into `inviter`'s org through this mesh's e-mail and signs the member in. */
  const invited = (inviter: User, role: 'admin' | 'member'): Promise<User> =>
    invitedMember(mesh, inviter, role, smtp);

  /** The deliveries of `event` to `hookPath` whose data names `approvalId`. */
  const delivered = (hookPath: string, event: string, approvalId: string): Received[] =>
    receiver.seen.filter(
      (s) =>
        s.path === hookPath &&
        s.headers['x-webhook-event'] === event &&
        s.raw.toString('utf8').includes(approvalId),
    );

  it('approval.created, approval.decided and pending_approval.* reach a subscribed webhook, signed over the body', async () => {
    const owner = await quickUser(mesh);
    const admin1 = await invited(owner, 'admin');
    const admin2 = await invited(owner, 'admin');
    const hookPath = `/hook-${randomBytes(3).toString('hex')}`;
    const hook = await api(mesh, 'POST', '/v1/webhooks', {
      token: owner.token,
      body: {
        url: `http://127.0.0.2:${receiver.port}${hookPath}`,
        events: [
          'approval.created',
          'approval.decided',
          'pending_approval.created',
          'pending_approval.approved',
          'pending_approval.executed',
        ],
      },
    });
    expect({ status: hook.status, body: hook.body }).toMatchObject({ status: 201 });
    const secret = hook.body['secret'] as string;
    const agent = await anvilAgent(mesh, owner, {
      action_approval_policy: {
        rules: [
          {
            conditions: [{ type: 'action_in', actions: ['treasury.move'] }],
            risk_tier: 1,
            approval: { min_approvals: 2, required_roles: ['admin'] },
          },
        ],
      },
    });
    const asked = await api(mesh, 'POST', '/v1/approvals/request', {
      token: agent.token,
      body: {
        action: 'treasury.move',
        target_type: 'transfer',
        target_id: 't-1',
        summary: { title: 'Move the reserve' },
        payload: { secret_note: 'never in an event' },
      },
    });
    expect(asked.status).toBe(202);
    const id = asked.body['id'] as string;
    expect((await decide(mesh, admin1.token, id, 'approve')).body['status']).toBe('pending');
    expect((await decide(mesh, admin2.token, id, 'approve')).body['status']).toBe('approved');
    expect((await execute(mesh, admin1.token, id)).status).toBe(200);

    const wanted = [
      ['approval.created', 1],
      ['approval.decided', 2],
      ['pending_approval.created', 1],
      ['pending_approval.approved', 1],
      ['pending_approval.executed', 1],
    ] as const;
    await waitFor(
      async () => wanted.every(([e, n]) => delivered(hookPath, e, id).length >= n),
      30_000,
      100,
    ).catch(() => {
      const got = receiver.seen.filter((s) => s.path === hookPath).map((s) => s.headers['x-webhook-event']);
      throw new Error(`deliveries for ${id}: ${JSON.stringify(got)}`);
    });
    for (const s of receiver.seen.filter((x) => x.path === hookPath)) {
      const sig = String(s.headers['x-webhook-signature']);
      const expected = createHmac('sha256', secret).update(s.raw).digest('hex');
      expect(sig).toHaveLength(expected.length);
      expect(timingSafeEqual(Buffer.from(sig, 'hex'), Buffer.from(expected, 'hex'))).toBe(true);
      expect(s.raw.toString('utf8')).not.toContain('never in an event');
    }
    const created = JSON.parse(delivered(hookPath, 'approval.created', id)[0]!.raw.toString('utf8')) as Body;
    expect(created).toMatchObject({
      type: 'approval.created',
      org_id: owner.orgId,
      data: {
        approval_id: id,
        org_id: owner.orgId,
        agent_id: agent.id,
        action: 'treasury.move',
        target_type: 'transfer',
        target_id: 't-1',
        risk_tier: 1,
        kind: 'consensus',
        title: 'Move the reserve',
        expires_at: expect.any(String),
      },
    });
    const decisions = delivered(hookPath, 'approval.decided', id).map(
      (s) => (JSON.parse(s.raw.toString('utf8')) as { data: Body }).data,
    );
    expect(decisions).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          approval_id: id,
          decision: 'approved',
          decided_by: admin1.userId,
          status: 'pending',
        }),
        expect.objectContaining({
          approval_id: id,
          decision: 'approved',
          decided_by: admin2.userId,
          status: 'approved',
        }),
      ]),
    );
  });

  it('an approved transaction past expires_at cannot be resumed; the sweeper marks it (and pending ones) expired, audited; a consensus one is pending_approval.expired', async () => {
    const { owner, agent, to, body, txId, approvalId, pendingId, consensusId, hookPath } = expiring;
    // The rule's expiry_secs, not the 24 h default.
    for (const a of [expiring.approved, expiring.pending, expiring.consensus]) {
      const lifetime = Date.parse(a['expires_at'] as string) - Date.parse(a['created_at'] as string);
      expect(Math.abs(lifetime - EXPIRY_SECS * 1000)).toBeLessThan(2_000);
    }
    const expiresAt = Date.parse(expiring.approved['expires_at'] as string);
    const nonce0 = await settledNonce(chain, agent.address);

    // Past expires_at (the server's clock: wait a little beyond it).
    await new Promise((r) => setTimeout(r, Math.max(0, expiresAt + 1_500 - Date.now())));
    const resumed = await submitTx(mesh, agent, { ...body, resume_tx_id: txId });
    expect({ status: resumed.status, body: resumed.body }).toMatchObject({
      status: 403,
      body: { type: 'approval_required', approval_request_id: approvalId },
    });
    expect(await settledNonce(chain, agent.address)).toBe(nonce0);
    expect(await chain.getBalance(to)).toBe(0n);

    for (const id of [approvalId, pendingId, consensusId]) {
      await waitFor(
        async () => (await getApproval(mesh, owner.token, id)).body['status'] === 'expired',
        15_000,
        250,
      ).catch(async () => {
        throw new Error(
          `approval ${id} not expired: ${JSON.stringify((await getApproval(mesh, owner.token, id)).body)}`,
        );
      });
      const rec = await auditRecords(mesh, owner.token, 'approval.expired', (e) => e['resource_id'] === id);
      expect(rec[0]).toMatchObject({ actor_type: 'system', resource_type: 'approval' });
    }
    // The consensus approval's expiry reaches the org's webhook (once); the single ones are no pending approvals.
    await waitFor(
      async () => delivered(hookPath, 'pending_approval.expired', consensusId).length > 0,
      15_000,
      100,
    ).catch(() => {
      const got = receiver.seen.filter((s) => s.path === hookPath).map((s) => s.headers['x-webhook-event']);
      throw new Error(`no pending_approval.expired for ${consensusId}: ${JSON.stringify(got)}`);
    });
    const [expired, ...more] = delivered(hookPath, 'pending_approval.expired', consensusId);
    expect(more).toEqual([]);
    expect(JSON.parse(expired!.raw.toString('utf8'))).toMatchObject({
      type: 'pending_approval.expired',
      org_id: owner.orgId,
      data: { approval_id: consensusId, expires_at: expect.any(String) },
    });
    const data = (JSON.parse(expired!.raw.toString('utf8')) as { data: Body }).data;
    expect(Date.parse(data['expires_at'] as string)).toBe(
      Date.parse(expiring.consensus['expires_at'] as string),
    );
    expect(
      receiver.seen.filter((s) => s.path === hookPath && !s.raw.toString('utf8').includes(consensusId)),
    ).toEqual([]);
    expectProblem(await decide(mesh, owner.token, pendingId, 'approve'), 409);
    expectProblem(await decide(mesh, owner.token, consensusId, 'approve'), 409);
    // Expired stays refused, and nothing was sent.
    const again = await submitTx(mesh, agent, { ...body, resume_tx_id: txId });
    expect(again.status).toBe(403);
    expect(await settledNonce(chain, agent.address)).toBe(nonce0);
  });
});
