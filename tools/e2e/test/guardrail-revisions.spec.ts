import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { SmtpCapture } from '@custos/testing';
import { TEST_PASSWORD, api, expectProblem, quickUser } from '../src/api';
import { auditRecords, decide, getApproval } from '../src/approvals';
import { platformAdmin } from '../src/chains';
import { invitedMember } from '../src/members';
import { type MailSpool, readMailSpool, startMailSpool } from '../src/mail-spool';
import { type Mesh, startMesh } from '../src/mesh';
import { SMTP_PASSWORD, SMTP_USER } from '../src/profiles';

// Issue 20, "Revisions and changes": every guardrail edit is a revision; under the setting
// guardrail_changes_require_approval a widening edit answers 202 with pending_approval_id and
// applies only when resubmitted with an approval another owner or admin gave for exactly that
// change, once; a narrowing applies at once.

type User = Awaited<ReturnType<typeof quickUser>>;
type Body = Record<string, unknown>;

const SETTING = '/v1/admin/settings/guardrail_changes_require_approval';

describe('guardrail revisions and approval-gated widening', () => {
  let mesh: Mesh;
  let spoolDir: string;
  let spool: MailSpool;
  let smtp: SmtpCapture;
  let owner: User;
  let admin: User;
  let member: User;
  let platform: string;
  let agentId: string;

  /** PATCH the agent; `confirm` null sends no X-Auth-Confirm. */
  const patch = (body: Body, token = owner.token, confirm: string | null = TEST_PASSWORD) =>
    api(mesh, 'PATCH', `/v1/agents/${agentId}`, { token, body, ...(confirm !== null ? { confirm } : {}) });
  const maxValue = async () =>
    (await api(mesh, 'GET', `/v1/agents/${agentId}`, { token: owner.token })).body['tx_max_value_eth'];
  const revisions = (query = `?agent_id=${agentId}`, token = owner.token) =>
    api(mesh, 'GET', `/v1/org/guardrail-revisions${query}`, { token });

  beforeAll(async () => {
    // A private mesh: the setting is platform-wide, and on the shared mesh it would hold other
    // specs' widening edits for approval while this one runs.
    spoolDir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-e2e-revisions-mail-'));
    spool = await startMailSpool(spoolDir);
    const smtpUrl = spool.url(SMTP_USER, SMTP_PASSWORD);
    smtp = readMailSpool(spoolDir, { port: spool.port, url: smtpUrl });
    mesh = await startMesh({
      extraEnv: {
        EMAIL_VERIFICATION_REQUIRED: 'false',
        SMTP_URL: smtpUrl,
        SMTP_ALLOW_INSECURE: 'true',
      },
    });
    // The install's first account is its platform admin (PLATFORM_ADMIN_EMAILS is empty here).
    platform = await platformAdmin(mesh);
    owner = await quickUser(mesh);
    admin = await invitedMember(mesh, owner, 'admin', smtp);
    member = await invitedMember(mesh, owner, 'member', smtp);
    const created = await api(mesh, 'POST', '/v1/agents', {
      token: owner.token,
      body: { name: 'guarded', tx_max_value_eth: '1' },
    });
    expect(created.status).toBe(201);
    agentId = (created.body['agent'] as Body)['id'] as string;
    const on = await api(mesh, 'PUT', SETTING, { token: platform, body: { value: 'true' } });
    if (on.status !== 200) throw new Error(`setting: ${on.status} ${JSON.stringify(on.body)}`);
  }, 180_000);

  afterAll(async () => {
    await mesh?.stop();
    await smtp?.close();
    await spool?.close();
    if (spoolDir) fs.rmSync(spoolDir, { recursive: true, force: true });
  });

  let approvalId: string;

  it('answers a widening edit 202 with pending_approval_id and applies nothing', async () => {
    const r = await patch({ tx_max_value_eth: '10' });
    expect(r.status).toBe(202);
    expect(r.body).toMatchObject({
      status: 'pending_approval',
      pending_approval_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      agent_id: agentId,
      change: 'widen',
      change_hash: expect.stringMatching(/^[0-9a-f]{64}$/),
      before: expect.objectContaining({ tx_max_value_eth: '1' }),
      after: expect.objectContaining({ tx_max_value_eth: '10' }),
    });
    approvalId = r.body['pending_approval_id'] as string;
    expect(r.body['approval_id']).toBe(approvalId);
    expect(await maxValue()).toBe('1');
    expect((await revisions()).body['revisions']).toEqual([]);

    const a = await getApproval(mesh, admin.token, approvalId);
    expect(a.status).toBe(200);
    expect(a.body).toMatchObject({
      action: 'policy_change',
      target_type: 'agent_guardrails',
      target_id: r.body['change_hash'],
      status: 'pending',
      risk_tier: 2,
    });
    // Without the step-up nothing is raised: the gateway challenges first.
    const noStepUp = await patch({ tx_max_value_eth: '10' }, owner.token, null);
    expect(noStepUp.status).toBe(401);
    expect(await maxValue()).toBe('1');
  });

  it('refuses the requester’s own vote and a member’s, and a decision without a step-up', async () => {
    expectProblem(await decide(mesh, owner.token, approvalId, 'approve', TEST_PASSWORD), 403);
    expectProblem(await decide(mesh, member.token, approvalId, 'approve', TEST_PASSWORD), 403);
    expectProblem(await decide(mesh, admin.token, approvalId, 'approve'), 401, { type: 'step_up_required' });
    expect((await getApproval(mesh, admin.token, approvalId)).body['status']).toBe('pending');
    // Resubmitted before it is approved: 403 approval_required, nothing changed.
    expectProblem(await patch({ tx_max_value_eth: '10', approval_id: approvalId }), 403, {
      type: 'approval_required',
    });
    expect(await maxValue()).toBe('1');
  });

  it('applies the same body with the approved approval_id once; another body or a second use is 403', async () => {
    const approved = await decide(mesh, admin.token, approvalId, 'approve', TEST_PASSWORD);
    expect(approved.status).toBe(200);
    expect(approved.body['status']).toBe('approved');

    expectProblem(await patch({ tx_max_value_eth: '11', approval_id: approvalId }), 403, {
      type: 'approval_required',
    });
    expect(await maxValue()).toBe('1');
    expectProblem(await patch({ name: 'renamed', approval_id: approvalId }), 400, { field: 'approval_id' });

    const applied = await patch({ tx_max_value_eth: '10', approval_id: approvalId });
    expect(applied.status).toBe(200);
    expect(applied.body['tx_max_value_eth']).toBe('10');

    // The same edit again needs no approval (nothing would change): 409, the approval not touched.
    expectProblem(await patch({ tx_max_value_eth: '10', approval_id: approvalId }), 409, {
      field: 'approval_id',
    });
    expect(await maxValue()).toBe('10');
  });

  it('applies a narrowing edit at once; the used approval never widens again', async () => {
    const r = await patch({ tx_max_value_eth: '2' });
    expect(r.status).toBe(200);
    expect(r.body['tx_max_value_eth']).toBe('2');
    expectProblem(await patch({ tx_max_value_eth: '10', approval_id: approvalId }), 403, {
      type: 'approval_required',
    });
    expect(await maxValue()).toBe('2');
  });

  it('lists both revisions newest first with before, after and the approval id; members are 403', async () => {
    const r = await revisions();
    expect(r.status).toBe(200);
    const list = r.body['revisions'] as Body[];
    expect(list).toHaveLength(2);
    expect(list[0]).toMatchObject({
      agent_id: agentId,
      actor_id: owner.userId,
      change: 'narrow',
      approval_id: null,
      before: expect.objectContaining({ tx_max_value_eth: '10' }),
      after: expect.objectContaining({ tx_max_value_eth: '2' }),
    });
    expect(list[1]).toMatchObject({
      agent_id: agentId,
      actor_id: owner.userId,
      change: 'widen',
      approval_id: approvalId,
      before: expect.objectContaining({ tx_max_value_eth: '1' }),
      after: expect.objectContaining({ tx_max_value_eth: '10' }),
    });
    expect(((await revisions('?limit=1')).body['revisions'] as Body[]).map((v) => v['id'])).toEqual([
      list[0]!['id'],
    ]);
    expectProblem(await revisions('', member.token), 403);
    expectProblem(await revisions('?limit=0'), 400, { field: 'limit' });
    // Another org sees none of them.
    const stranger = await quickUser(mesh);
    expect((await revisions('', stranger.token)).body['revisions']).toEqual([]);
    // The approval's request and use are audited.
    await auditRecords(mesh, owner.token, 'approval.requested', (e) => e['resource_id'] === approvalId);
    await auditRecords(mesh, owner.token, 'approval.consumed', (e) => e['resource_id'] === approvalId);
  });
});
