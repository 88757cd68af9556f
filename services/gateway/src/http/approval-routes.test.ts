import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express, { type RequestHandler } from 'express';
import type { Principal } from '@custos/auth';
import type { Approval } from '@custos/proto/custos/approvals/v1/messages';
import type { Transaction } from '@custos/proto/custos/signer/v1/transactions';
import {
  CustosError,
  ConflictError,
  PermissionDeniedError,
  canonicalJson,
  createLogger,
  toGrpcStatus,
} from '@custos/service-kit';
import type { Peers } from '../peers';
import { agentBody, agentFields, MAX_RULE_JSON_BYTES, UpdateAgentBody } from './agent-schemas';
import { approvalRoutes } from './approval-routes';
import { humanOnly } from './authenticate';
import { errorHandler, notFound } from './problem';
import { ROUTE_TABLE } from './routes';
import { signRoutes } from './sign-routes';
import { transactionRoutes } from './transaction-routes';

// The approvals routes, and the approval parts of the transaction and sign routes, against fakes
// of the approvals service and signer (peer services: a fake is allowed in a unit test): what the
// gateway checks itself (400 naming the field, nothing sent on), how it maps answers (202 +
// Location, ApprovalJson with nulls, 202 of a held transaction or sign intent) and what it passes.

type Callback = (err: unknown, res?: unknown) => void;
type Calls = Array<[string, Record<string, unknown>]>;

const ORG = '00000000-0000-4000-8000-000000000001';
const AGENT = '00000000-0000-4000-8000-0000000000a1';
const USER = '00000000-0000-4000-8000-0000000000u1';
const APPROVAL = '00000000-0000-4000-8000-0000000000f1';
const HELD_TO = '0x000000000000000000000000000000000000dEaD';

function approval(over: Partial<Approval> = {}): Approval {
  return {
    id: APPROVAL,
    orgId: ORG,
    agentId: AGENT,
    userId: USER,
    action: 'payments.refund',
    targetType: 'refund',
    targetId: 'r-1',
    summary: { title: 'Refund', body: '', fields: [] },
    payload: undefined,
    reason: '',
    declaredRiskTier: 0,
    riskTier: 1,
    status: 'pending',
    kind: 'single',
    requirement: undefined,
    preview: undefined,
    rule: undefined,
    decisionReason: '',
    decidedBy: '',
    decidedAt: '',
    credentialType: '',
    expiresAt: '2026-11-26T00:00:00.000Z',
    createdAt: '2026-11-25T00:00:00.000Z',
    executedAt: '',
    executedBy: '',
    consumedAt: '',
    votes: [],
    approvalsCount: 0,
    ...over,
  };
}

function transaction(over: Partial<Transaction> = {}): Transaction {
  return {
    id: 'tx-1',
    agentId: AGENT,
    chain: 'anvil',
    chainId: '31337',
    from: '0x1111111111111111111111111111111111111111',
    to: HELD_TO,
    valueWei: '1',
    data: '0x',
    nonce: '0',
    hasNonce: false,
    gasLimit: '',
    txType: 2,
    maxFeePerGas: '',
    maxPriorityFeePerGas: '',
    gasPrice: '',
    status: 'broadcast',
    txHash: '',
    signedTx: '',
    errorMessage: '',
    blockNumber: '0',
    hasBlockNumber: false,
    gasUsed: '',
    createdAt: '2026-11-25T00:00:00.000Z',
    signedAt: '',
    broadcastAt: '',
    confirmedAt: '',
    family: 'evm',
    fee: '',
    details: {},
    approvalId: '',
    ...over,
  } as Transaction;
}

/** The approvals service and signer, answering like them for the cases below. */
function fakePeers(calls: Calls): Peers {
  const channel = { getChannel: () => ({ getTarget: () => 'fake' }) };
  const fail = (cb: Callback, err: CustosError) => cb(toGrpcStatus(err));
  const approvals = {
    ...channel,
    requestApproval(req: Record<string, unknown>, _md: unknown, _o: unknown, cb: Callback) {
      calls.push(['requestApproval', req]);
      cb(null, {
        approval: approval({
          declaredRiskTier: req['declaredRiskTier'] as number,
          riskTier: Math.max(2, req['declaredRiskTier'] as number),
          payload: req['payload'] as Approval['payload'],
        }),
      });
    },
    getApproval(req: Record<string, unknown>, _md: unknown, _o: unknown, cb: Callback) {
      calls.push(['getApproval', req]);
      cb(null, {
        approval: approval({
          kind: 'consensus',
          status: 'approved',
          requirement: {
            minApprovals: 2,
            requiredRoles: ['admin'],
            perRoleMinimums: {},
            requireCredentialTypes: [],
            selfApprovalAllowed: false,
          },
          approvalsCount: 2,
          votes: [
            {
              userId: 'u2',
              role: 'admin',
              decision: 'approved',
              credentialType: 'totp',
              reason: '',
              createdAt: '2026-11-25T00:01:00.000Z',
            },
          ],
        }),
      });
    },
    listApprovals(req: Record<string, unknown>, _md: unknown, _o: unknown, cb: Callback) {
      calls.push(['listApprovals', req]);
      cb(null, { approvals: [approval(), approval({ id: 'other', status: 'approved' })] });
    },
    decideApproval(req: Record<string, unknown>, _md: unknown, _o: unknown, cb: Callback) {
      calls.push(['decideApproval', req]);
      // Tier 2 here: no credential is the service's 401 step_up_required.
      if (req['credential'] === '')
        return fail(
          cb,
          new CustosError('unauthenticated', {
            type: 'step_up_required',
            detail: 'tier 2 needs a step-up',
            extensions: { purpose: 'approval.decide' },
          }),
        );
      if (req['credential'] === 'wrong')
        return fail(
          cb,
          new PermissionDeniedError('the step-up credential is not valid', {
            type: 'step_up_required',
            extensions: { purpose: 'approval.decide' },
          }),
        );
      cb(null, {
        approval: approval({
          status: 'approved',
          decidedBy: USER,
          decidedAt: '2026-11-25T00:02:00.000Z',
          decisionReason: req['reason'] as string,
          credentialType: 'password',
        }),
      });
    },
    executePendingApproval(req: Record<string, unknown>, _md: unknown, _o: unknown, cb: Callback) {
      calls.push(['executePendingApproval', req]);
      if (req['approvalId'] === 'single')
        return fail(cb, new ConflictError('only consensus approvals are executed'));
      cb(null, {
        approval: approval({
          kind: 'consensus',
          status: 'executed',
          targetType: 'transaction',
          targetId: 'tx-1',
          executedAt: '2026-11-25T00:03:00.000Z',
        }),
      });
    },
  };
  const signer = {
    ...channel,
    submitTransaction(req: Record<string, unknown>, _md: unknown, _o: unknown, cb: Callback) {
      calls.push(['submitTransaction', req]);
      if (req['resumeTxId'] === 'tx-other')
        return fail(
          cb,
          new PermissionDeniedError('the approval does not allow this resume', {
            type: 'approval_required',
            extensions: { approval_request_id: APPROVAL },
          }),
        );
      const held = req['to'] === HELD_TO && req['resumeTxId'] === '';
      cb(null, {
        transaction: transaction({
          status: held ? 'awaiting_approval' : 'broadcast',
          approvalId: req['to'] === HELD_TO ? APPROVAL : '',
          to: req['to'] as string,
        }),
        replayed: false,
      });
    },
    signIntent(req: Record<string, unknown>, _md: unknown, _o: unknown, cb: Callback) {
      calls.push(['signIntent', req]);
      const base = {
        intentType: 'personal_sign',
        chain: 'anvil',
        from: '0x1111111111111111111111111111111111111111',
      };
      if (req['approvalId'] === '')
        return cb(null, { ...base, status: 'awaiting_approval', approvalId: APPROVAL });
      cb(null, { ...base, signature: '0xsig', messageHash: '0xhash', status: '', approvalId: '' });
    },
  };
  return {
    client: (_ctor: unknown, peer: string) => (peer === 'approvals' ? approvals : signer),
  } as unknown as Peers;
}

/** A bearer `agent` or `user` is that principal (the real check is authenticate's, tested elsewhere). */
const fakeAuth: RequestHandler = (req, _res, next) => {
  const who = req.header('authorization');
  if (who === 'Bearer agent')
    req.principal = { kind: 'agent', agentId: AGENT, orgId: ORG } as unknown as Principal;
  else if (who === 'Bearer user')
    req.principal = { kind: 'user', userId: USER, orgId: ORG, role: 'admin' } as unknown as Principal;
  else return next(new CustosError('unauthenticated', { detail: 'missing bearer token' }));
  next();
};

describe('approvals routes and the approval parts of transactions and sign intents', () => {
  let server: Server;
  let base: string;
  const calls: Calls = [];

  beforeAll(async () => {
    const app = express();
    app.use(express.json());
    const guards = { authenticated: [fakeAuth], human: [fakeAuth, humanOnly] };
    const peers = fakePeers(calls);
    app.use(approvalRoutes(peers, guards));
    app.use(transactionRoutes(peers, guards));
    app.use(signRoutes(peers, guards));
    app.use(notFound(ROUTE_TABLE));
    app.use(errorHandler(createLogger({ service: 'gateway-test', level: 'silent' })));
    server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise((r) => server.close(r)));
  beforeEach(() => calls.splice(0));

  const send = (method: string, path: string, who: 'agent' | 'user', body?: unknown, headers = {}) =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${who}`, 'content-type': 'application/json', ...headers },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  const request = (body: Record<string, unknown>) => send('POST', '/v1/approvals/request', 'agent', body);
  const good = {
    action: 'payments.refund',
    target_type: 'refund',
    target_id: 'r-1',
    summary: {
      title: 'Refund order 42',
      body: 'Customer asked',
      fields: [{ label: 'Amount', value: '10 USD' }],
    },
  };

  /** A 400 problem naming `field`, with nothing sent to a service. */
  async function expect400(r: Response, field: string) {
    expect(r.status).toBe(400);
    expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const p = (await r.json()) as Record<string, unknown>;
    expect(p['field']).toBe(field);
    expect(calls).toEqual([]);
    return p;
  }

  describe('POST /v1/approvals/request', () => {
    it('answers 202 with Location and the approval (declared and enforced tier, nulls for empty)', async () => {
      const r = await request({ ...good, payload: { order: 42 }, declared_risk_tier: 1 });
      expect(r.status).toBe(202);
      expect(r.headers.get('location')).toBe(`/v1/approvals/${APPROVAL}`);
      const a = (await r.json()) as Record<string, unknown>;
      expect(a).toMatchObject({
        id: APPROVAL,
        approval_id: APPROVAL,
        org_id: ORG,
        user_id: USER,
        agent_id: AGENT,
        status: 'pending',
        kind: 'single',
        declared_risk_tier: 1,
        risk_tier: 2,
        enforced_risk_tier: 2,
        payload: { order: 42 },
        requirement: null,
        reason: null,
        decided_by: null,
        decided_at: null,
        decision_reason: null,
        credential_type: null,
        preview: null,
        rule: null,
        executed_at: null,
        consumed_at: null,
        votes: [],
        summary: { title: 'Refund', body: null, fields: [] },
      });
      expect(calls).toEqual([
        [
          'requestApproval',
          expect.objectContaining({
            action: 'payments.refund',
            targetType: 'refund',
            targetId: 'r-1',
            summary: {
              title: 'Refund order 42',
              body: 'Customer asked',
              fields: [{ label: 'Amount', value: '10 USD' }],
            },
            payload: { order: 42 },
            reason: '',
            declaredRiskTier: 1,
          }),
        ],
      ]);
    });

    it('takes the deprecated risk_tier as the declared tier; none declared is 0', async () => {
      await request({ ...good, risk_tier: 3 });
      await request(good);
      expect(calls.map(([, req]) => req['declaredRiskTier'])).toEqual([3, 0]);
    });

    it.each(['policy_change', 'card_order', 'agent_transaction', 'agent_execution', 'agent_sign_intent'])(
      'refuses the platform-created action %s with 400 naming action',
      async (action) => {
        const p = await expect400(await request({ ...good, action }), 'action');
        expect(p['detail']).toContain('platform');
      },
    );

    it('takes the control-plane actions and namespace.verb, refuses other names and 65 characters', async () => {
      for (const action of [
        'access_request',
        'policy_request',
        'binding_request',
        'a.b',
        `${'a'.repeat(31)}.${'b'.repeat(32)}`,
      ])
        expect((await request({ ...good, action })).status).toBe(202);
      calls.splice(0);
      await expect400(await request({ ...good, action: `${'a'.repeat(32)}.${'b'.repeat(32)}` }), 'action');
      for (const action of ['Payments.Refund', 'refund', 'a.b.c', '.verb', 'ns.', ''])
        await expect400(await request({ ...good, action }), 'action');
    });

    it('refuses tiers outside 1-3 naming the field', async () => {
      await expect400(await request({ ...good, declared_risk_tier: 4 }), 'declared_risk_tier');
      await expect400(await request({ ...good, declared_risk_tier: 0 }), 'declared_risk_tier');
      await expect400(await request({ ...good, declared_risk_tier: 1.5 }), 'declared_risk_tier');
      await expect400(await request({ ...good, risk_tier: 4 }), 'risk_tier');
    });

    it('checks the summary shape', async () => {
      await expect400(await request({ ...good, summary: undefined }), 'summary');
      await expect400(await request({ ...good, summary: { body: 'x' } }), 'summary.title');
      await expect400(await request({ ...good, summary: { title: 't'.repeat(201) } }), 'summary.title');
      await expect400(
        await request({ ...good, summary: { title: 't', body: 'b'.repeat(4001) } }),
        'summary.body',
      );
      const fields = Array.from({ length: 51 }, () => ({ label: 'l', value: 'v' }));
      await expect400(await request({ ...good, summary: { title: 't', fields } }), 'summary.fields');
      await expect400(
        await request({ ...good, summary: { title: 't', fields: [{ label: 'l'.repeat(101), value: 'v' }] } }),
        'summary.fields[0].label',
      );
      await expect400(
        await request({
          ...good,
          summary: { title: 't', fields: [{ label: 'l', value: 'v'.repeat(1001) }] },
        }),
        'summary.fields[0].value',
      );
      await expect400(await request({ ...good, summary: { title: 't', colour: 'red' } }), 'summary.colour');
      // Blank text is no title or label (the service trims and requires them too).
      await expect400(await request({ ...good, summary: { title: '   ' } }), 'summary.title');
      await expect400(
        await request({ ...good, summary: { title: 't', fields: [{ label: ' ', value: 'v' }] } }),
        'summary.fields[0].label',
      );
    });

    it('takes a payload object up to 64 KiB of JSON, refuses larger, arrays and strings', async () => {
      const big = (n: number) => ({ x: 'y'.repeat(n - 8) }); // {"x":"…"} is n characters
      expect((await request({ ...good, payload: big(65_536) })).status).toBe(202);
      calls.splice(0);
      await expect400(await request({ ...good, payload: big(65_537) }), 'payload');
      // Counted in bytes of UTF-8, as the approvals service counts: 'é' is two.
      await expect400(await request({ ...good, payload: { x: 'é'.repeat(32_765) } }), 'payload');
      await expect400(await request({ ...good, payload: [1] }), 'payload');
      await expect400(await request({ ...good, payload: 'text' }), 'payload');
    });

    it('refuses a reason over 1000 characters and unknown fields', async () => {
      await expect400(await request({ ...good, reason: 'r'.repeat(1001) }), 'reason');
      await expect400(await request({ ...good, colour: 'red' }), 'colour');
    });
  });

  describe('reading', () => {
    it('GET /v1/approvals/{id} maps a consensus approval (requirement, votes, count)', async () => {
      const r = await send('GET', `/v1/approvals/${APPROVAL}`, 'agent');
      expect(r.status).toBe(200);
      expect(await r.json()).toMatchObject({
        kind: 'consensus',
        status: 'approved',
        requirement: {
          min_approvals: 2,
          required_roles: ['admin'],
          per_role_minimums: {},
          require_credential_types: [],
          self_approval_allowed: false,
        },
        approvals_count: 2,
        votes: [
          {
            user_id: 'u2',
            role: 'admin',
            decision: 'approved',
            credential_type: 'totp',
            reason: null,
            created_at: '2026-11-25T00:01:00.000Z',
          },
        ],
      });
      expect(calls).toEqual([['getApproval', { approvalId: APPROVAL }]]);
    });

    it('GET /v1/approvals passes the filters; agents are 403; a bad status is 400', async () => {
      const r = await send('GET', `/v1/approvals?status=pending&agent_id=${AGENT}&limit=10`, 'user');
      expect(r.status).toBe(200);
      expect(((await r.json()) as { approvals: unknown[] }).approvals).toHaveLength(2);
      expect(calls).toEqual([['listApprovals', { status: 'pending', agentId: AGENT, limit: 10 }]]);
      calls.splice(0);
      expect((await send('GET', '/v1/approvals', 'agent')).status).toBe(403);
      expect(calls).toEqual([]);
      await expect400(await send('GET', '/v1/approvals?status=done', 'user'), 'status');
      await expect400(await send('GET', '/v1/approvals?limit=501', 'user'), 'limit');
    });

    it('GET /v1/approvals documents that list items have payload, preview and rule null and pages end early', () => {
      const route = ROUTE_TABLE.find((r) => r.method === 'GET' && r.path === '/v1/approvals');
      const description = route?.spec.responses[200]?.description ?? '';
      expect(description).toMatch(/`payload`, `preview` and `rule` are null/);
      expect(description).toMatch(/GET \/v1\/approvals\/\{id\} has them/);
      expect(description).toMatch(/page by `limit`/);
    });
  });

  describe('POST /v1/approvals/{id}/decide', () => {
    const decide = (body: unknown, headers = {}) =>
      send('POST', `/v1/approvals/${APPROVAL}/decide`, 'user', body, headers);

    it('passes decision, reason and X-Auth-Confirm as credential; answers 200 with approval_id', async () => {
      const r = await decide({ decision: 'approve', reason: 'ok' }, { 'X-Auth-Confirm': 'rat_abc' });
      expect(r.status).toBe(200);
      expect(await r.json()).toMatchObject({
        approval_id: APPROVAL,
        status: 'approved',
        decided_by: USER,
        decision_reason: 'ok',
        credential_type: 'password',
      });
      expect(calls).toEqual([
        [
          'decideApproval',
          { approvalId: APPROVAL, decision: 'approve', reason: 'ok', credential: 'rat_abc' },
        ],
      ]);
    });

    it.each(['approve', 'approved', 'reject', 'rejected', 'denied'])(
      'takes the decision %s',
      async (decision) => {
        expect((await decide({ decision }, { 'X-Auth-Confirm': 'x' })).status).toBe(200);
      },
    );

    it('refuses another decision word 400 naming decision; a long reason 400 naming reason', async () => {
      for (const decision of ['yes', 'Approve', '', 1])
        await expect400(await decide({ decision }), 'decision');
      await expect400(await decide({}), 'decision');
      await expect400(await decide({ decision: 'approve', reason: 'r'.repeat(1001) }), 'reason');
      await expect400(await decide({ decision: 'approve', vote: 2 }), 'vote');
    });

    it("answers the service's refusal of a missing step-up with the 401 challenge naming approval.decide", async () => {
      const r = await decide({ decision: 'approve' });
      expect(r.status).toBe(401);
      expect(await r.json()).toMatchObject({
        type: 'step_up_required',
        purpose: 'approval.decide',
        accepted: ['reauth_token', 'password', 'totp'],
      });
      // The header is not required up front: the service was asked (tier 1 needs none).
      expect(calls).toHaveLength(1);
    });

    it('passes a refused credential through as 403 step_up_required', async () => {
      const r = await decide({ decision: 'approve' }, { 'X-Auth-Confirm': 'wrong' });
      expect(r.status).toBe(403);
      expect(await r.json()).toMatchObject({ type: 'step_up_required', purpose: 'approval.decide' });
    });

    it('refuses agents with 403 before the service', async () => {
      const r = await send('POST', `/v1/approvals/${APPROVAL}/decide`, 'agent', { decision: 'approve' });
      expect(r.status).toBe(403);
      expect(calls).toEqual([]);
    });
  });

  describe('POST /v1/pending-approvals/{id}/execute', () => {
    it('answers the reference ExecutePendingApprovalResponse', async () => {
      const r = await send('POST', `/v1/pending-approvals/${APPROVAL}/execute`, 'user');
      expect(r.status).toBe(200);
      expect(await r.json()).toEqual({
        pending_approval_id: APPROVAL,
        status: 'executed',
        executed_at: '2026-11-25T00:03:00.000Z',
        result: { approval_id: APPROVAL, target_type: 'transaction', target_id: 'tx-1' },
      });
    });

    it("passes the service's 409 through; agents are 403; a body is 400", async () => {
      const r = await send('POST', '/v1/pending-approvals/single/execute', 'user');
      expect(r.status).toBe(409);
      expect(((await r.json()) as { detail: string }).detail).toContain('only consensus approvals');
      calls.splice(0);
      expect((await send('POST', `/v1/pending-approvals/${APPROVAL}/execute`, 'agent')).status).toBe(403);
      await expect400(await send('POST', `/v1/pending-approvals/${APPROVAL}/execute`, 'user', { x: 1 }), 'x');
    });
  });

  describe('transactions', () => {
    const path = `/v1/agents/${AGENT}/transactions`;
    const tx = { chain: 'anvil', to: HELD_TO, value: '1', summary: { title: 'Pay Bob' } };

    it('answers 202 awaiting_approval with approval_id when signer holds it, and passes summary', async () => {
      const r = await send('POST', path, 'agent', tx);
      expect(r.status).toBe(202);
      expect(await r.json()).toMatchObject({
        id: 'tx-1',
        status: 'awaiting_approval',
        approval_id: APPROVAL,
      });
      expect(calls[0]![1]).toMatchObject({
        summary: { title: 'Pay Bob', body: '', fields: [] },
        resumeTxId: '',
        canonicalBody: canonicalJson(tx),
      });
    });

    it('answers the resume 201 with approval_id; the canonical body includes resume_tx_id', async () => {
      const body = { ...tx, resume_tx_id: 'tx-1' };
      const r = await send('POST', path, 'agent', body, { 'Idempotency-Key': 'k1' });
      expect(r.status).toBe(201);
      expect(await r.json()).toMatchObject({ status: 'broadcast', approval_id: APPROVAL });
      expect(calls[0]![1]).toMatchObject({
        resumeTxId: 'tx-1',
        idempotencyKey: 'k1',
        canonicalBody: canonicalJson(body),
      });
    });

    it('shows approval_id null on a transaction without one', async () => {
      const r = await send('POST', path, 'agent', {
        chain: 'anvil',
        to: '0x2222222222222222222222222222222222222222',
        value: '1',
      });
      expect(r.status).toBe(201);
      expect(((await r.json()) as Record<string, unknown>)['approval_id']).toBeNull();
      expect(calls[0]![1]['summary']).toBeUndefined();
    });

    it("passes signer's 403 approval_required with approval_request_id", async () => {
      const r = await send('POST', path, 'agent', { ...tx, resume_tx_id: 'tx-other' });
      expect(r.status).toBe(403);
      expect(await r.json()).toMatchObject({ type: 'approval_required', approval_request_id: APPROVAL });
    });

    it('checks the summary shape (400 naming the field)', async () => {
      await expect400(await send('POST', path, 'agent', { ...tx, summary: { title: '' } }), 'summary.title');
      await expect400(
        await send('POST', path, 'agent', { ...tx, summary: { title: ' \t' } }),
        'summary.title',
      );
    });
  });

  describe('sign intents', () => {
    const path = `/v1/agents/${AGENT}/sign`;
    const intent = {
      intent_type: 'personal_sign',
      chain: 'anvil',
      message: '0x68656c6c6f',
      summary: { title: 'Sign in' },
    };

    it('answers 202 {status, approval_id, intent_type, chain, from} when held; canonical body without approval_id', async () => {
      const r = await send('POST', path, 'agent', intent);
      expect(r.status).toBe(202);
      expect(await r.json()).toEqual({
        status: 'awaiting_approval',
        approval_id: APPROVAL,
        intent_type: 'personal_sign',
        chain: 'anvil',
        from: '0x1111111111111111111111111111111111111111',
      });
      expect(calls[0]![1]).toMatchObject({
        approvalId: '',
        summary: { title: 'Sign in', body: '', fields: [] },
        canonicalBody: canonicalJson(intent),
      });
    });

    it('passes approval_id on the resume and binds it to the same canonical body', async () => {
      const r = await send('POST', path, 'agent', { ...intent, approval_id: APPROVAL });
      expect(r.status).toBe(200);
      expect(await r.json()).toMatchObject({ signature: '0xsig' });
      expect(calls[0]![1]).toMatchObject({ approvalId: APPROVAL, canonicalBody: canonicalJson(intent) });
    });
  });
});

describe('action_approval_policy: self_approval_allowed, skip_when, require_when', () => {
  const policy = {
    rules: [
      {
        conditions: [{ type: 'value_above', threshold_wei: '1000' }],
        risk_tier: 2,
        approval: { min_approvals: 2, required_roles: ['admin'] },
        self_approval_allowed: true,
        skip_when: [
          { to_address_in: ['0xabc'], value_above: '5' },
          { chain_in: ['anvil'], intent_type_in: ['transaction'], function_selector_in: ['0xa9059cbb'] },
        ],
        require_when: [
          { erc20_amount_above: '1000000' },
          { always: true },
          { action_in: ['policy.create'], action_kind_in: ['policy.*'] },
        ],
      },
    ],
  };

  it('maps FlatConditionSets to condition sets (value_above in gwei, always a condition) and back', () => {
    const fields = agentFields(UpdateAgentBody.parse({ action_approval_policy: policy }));
    const rule = fields.actionApprovalPolicy!.rules[0]!;
    expect(rule.selfApprovalAllowed).toBe(true);
    expect(rule.skipWhen[0]!.conditions).toEqual([
      expect.objectContaining({ type: 'value_above', thresholdGwei: '5' }),
      expect.objectContaining({ type: 'to_address_in', addresses: ['0xabc'] }),
    ]);
    expect(rule.skipWhen[1]!.conditions.map((c) => c.type)).toEqual([
      'chain_in',
      'function_selector_in',
      'intent_type_in',
    ]);
    expect(rule.requireWhen.map((s) => s.conditions)).toEqual([
      [expect.objectContaining({ type: 'erc20_amount_above', thresholdRaw: '1000000' })],
      [expect.objectContaining({ type: 'always' })],
      [
        expect.objectContaining({ type: 'action_in', actions: ['policy.create'] }),
        expect.objectContaining({ type: 'action_kind_in', actionKinds: ['policy.*'] }),
      ],
    ]);
    const shown = agentBody({
      actionApprovalPolicy: fields.actionApprovalPolicy,
    } as never).action_approval_policy;
    expect(shown).toEqual(policy);
  });

  it('takes only org roles and the credential types a vote can prove; a minimum needs its role', () => {
    const withApproval = (approval: Record<string, unknown>) => ({
      action_approval_policy: { rules: [{ conditions: [{ type: 'always' }], risk_tier: 2, approval }] },
    });
    const issues = (approval: Record<string, unknown>) =>
      UpdateAgentBody.safeParse(withApproval(approval)).error?.issues.map((i) => i.path.join('.')) ?? [];
    expect(
      issues({ min_approvals: 2, required_roles: ['admin', 'owner'], per_role_minimums: { admin: 1 } }),
    ).toEqual([]);
    expect(issues({ min_approvals: 2, required_roles: ['finance'] })).toEqual([
      'action_approval_policy.rules.0.approval.required_roles.0',
    ]);
    expect(issues({ min_approvals: 2, per_role_minimums: { Admin: 1 } })).toEqual([
      'action_approval_policy.rules.0.approval.per_role_minimums.Admin',
    ]);
    expect(issues({ min_approvals: 2, required_roles: ['admin'], per_role_minimums: { member: 1 } })).toEqual(
      ['action_approval_policy.rules.0.approval.per_role_minimums.member'],
    );
    expect(issues({ min_approvals: 2, require_credential_types: ['passkey'] })).toEqual([
      'action_approval_policy.rules.0.approval.require_credential_types.0',
    ]);
    expect(issues({ min_approvals: 2, require_credential_types: ['totp', 'password'] })).toEqual([]);
    const tier3 = (types: string[]) =>
      UpdateAgentBody.safeParse({
        action_approval_policy: {
          rules: [
            {
              conditions: [{ type: 'always' }],
              risk_tier: 3,
              approval: { min_approvals: 2, require_credential_types: types },
            },
          ],
        },
      }).error?.issues.map((i) => i.path.join('.')) ?? [];
    expect(tier3(['password'])).toEqual(['action_approval_policy.rules.0.approval.require_credential_types']);
    expect(tier3(['password', 'totp'])).toEqual([]);
  });

  it('refuses a rule over 32 KiB of JSON, naming the rule (approvals refuses a rule over 64 KiB)', () => {
    const sized = (n: number) => ({
      conditions: [{ type: 'to_address_in', addresses: Array.from({ length: n }, () => 'a'.repeat(256)) }],
      risk_tier: 2,
    });
    const issues = (rules: unknown[]) =>
      UpdateAgentBody.safeParse({ action_approval_policy: { rules } }).error?.issues.map((i) => [
        i.path.join('.'),
        i.message,
      ]) ?? [];
    expect(Buffer.byteLength(JSON.stringify(sized(120)))).toBeLessThan(MAX_RULE_JSON_BYTES);
    expect(Buffer.byteLength(JSON.stringify(sized(130)))).toBeGreaterThan(MAX_RULE_JSON_BYTES);
    expect(issues([sized(120)])).toEqual([]);
    expect(issues([sized(1), sized(1000)])).toEqual([
      [
        'action_approval_policy.rules.1',
        `must be at most ${MAX_RULE_JSON_BYTES} bytes of JSON (the rule travels with each approval request)`,
      ],
    ]);
    expect(issues([sized(130)]).map(([p]) => p)).toEqual(['action_approval_policy.rules.0']);
  });

  it('shows none of them on a rule without them', () => {
    const plain = { rules: [{ conditions: [{ type: 'always' }], risk_tier: 1 }] };
    const fields = agentFields(UpdateAgentBody.parse({ action_approval_policy: plain }));
    expect(fields.actionApprovalPolicy!.rules[0]).toMatchObject({ skipWhen: [], requireWhen: [] });
    expect(fields.actionApprovalPolicy!.rules[0]!.selfApprovalAllowed).toBeUndefined();
    expect(
      agentBody({ actionApprovalPolicy: fields.actionApprovalPolicy } as never).action_approval_policy,
    ).toEqual(plain);
  });

  it.each([
    [{}, 'an empty set'],
    [{ always: false }, 'always false alone'],
    [{ value_above: '1.5' }, 'fractional gwei'],
    [{ value_above: 5 }, 'a number'],
    [{ value_above: '9007199254740992' }, 'gwei beyond a safe integer'],
    [{ threshold_gwei: 5 }, 'an unknown field'],
  ])('refuses %j (%s)', (set) => {
    const r = UpdateAgentBody.safeParse({
      action_approval_policy: {
        rules: [{ conditions: [{ type: 'always' }], risk_tier: 1, skip_when: [set] }],
      },
    });
    expect(r.success).toBe(false);
  });
});
