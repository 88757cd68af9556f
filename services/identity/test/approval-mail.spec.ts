import path from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import { type IdempotentConsumer, NatsLink, type ServiceEvents, subjectFor } from '@custos/events';
import { type Database, createDatabase, createLogger, createPool, migrateSchema } from '@custos/service-kit';
import {
  type TestNatsServer,
  createTestDatabase,
  testNatsServer,
  waitFor,
} from '@custos/service-kit/testing';
import { type SmtpCapture, startSmtpCapture } from '@custos/testing';
import { sql } from 'drizzle-orm';
import { DEFAULT_AGENT_SETTINGS } from '../src/agents/agent-fns';
import { AgentStore } from '../src/agents/agent-store';
import { SCHEMA } from '../src/db/schema';
import {
  APPROVAL_MAIL_CONSUMER,
  startApprovalCreatedConsumer,
} from '../src/events/approval-created-consumer';
import { SmtpMailer } from '../src/notifications/mailer';
import { Notifier } from '../src/notifications/notifier';
import { OrgStore } from '../src/orgs/org-store';
import { UserStore } from '../src/users/user-store';

// identity's consumer of `approval.created` behind a real nats-server, Postgres and SMTP server:
// every live human of the org gets one notice per approval, whatever JetStream redelivers.

const logger = createLogger({ service: 'identity-test', level: 'silent' });
const BASE = 'https://app.custos.test';

describe('approval notices (real NATS, Postgres and SMTP)', () => {
  const stream = `APM_${randomBytes(4).toString('hex').toUpperCase()}`;
  const prefix = `apm.${stream.toLowerCase()}`;
  let nats: TestNatsServer;
  let smtp: SmtpCapture;
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let db: Database;
  let link: NatsLink;
  let publisher: NatsLink;
  let consumer: IdempotentConsumer;
  let agents: AgentStore;
  let users: UserStore;
  let orgs: OrgStore;

  beforeAll(async () => {
    nats = await testNatsServer();
    await nats.start();
    smtp = await startSmtpCapture();
    database = await createTestDatabase('custos_identity_approval_mail');
    pool = createPool(database.url, 4, logger, 'identity-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    db = createDatabase(pool);
    agents = new AgentStore(db, pool);
    users = new UserStore(db);
    orgs = new OrgStore(db);
    link = new NatsLink([nats.url], { stream, subjectPrefix: prefix }, logger, 'identity-test');
    link.start();
    publisher = new NatsLink([nats.url], { stream, subjectPrefix: prefix }, logger, 'approvals-test');
    publisher.start();
    const mailer = new SmtpMailer(smtp.url(), 'Custos <no-reply@custos.local>', logger, {
      allowInsecure: true,
    });
    consumer = startApprovalCreatedConsumer({
      events: { link, stream, subjectPrefix: prefix } as ServiceEvents,
      db,
      notifier: new Notifier(mailer, BASE),
      orgs,
      agents,
      logger,
    });
  });

  afterAll(async () => {
    await consumer?.stop();
    await link?.close();
    await publisher?.close();
    await pool?.end();
    await database?.drop();
    await smtp?.close();
    await nats?.stop();
  });

  const email = (tag: string) => `${tag}-${randomBytes(4).toString('hex')}@example.org`;

  /** An org with an owner, an admin, a member and a deleted member, and an agent of it. */
  async function orgWithAgent() {
    const owner = email('owner');
    const u = await users.createUserWithOrg({
      email: owner,
      displayName: '',
      passwordHash: 'x',
      orgName: 'org',
      emailVerified: true,
    });
    const orgId = u!.orgId;
    const admin = email('admin');
    const member = email('member');
    const gone = email('gone');
    await orgs.insertInvitedUser({ email: admin, displayName: '', passwordHash: 'x', orgId, role: 'admin' });
    await orgs.insertInvitedUser({
      email: member,
      displayName: '',
      passwordHash: 'x',
      orgId,
      role: 'member',
    });
    const goneId = await orgs.insertInvitedUser({
      email: gone,
      displayName: '',
      passwordHash: 'x',
      orgId,
      role: 'member',
    });
    await db.execute(sql`update identity.users set deleted_at = now() where id = ${goneId}`);
    const agent = await agents.insert({
      orgId,
      name: 'Payroll bot',
      description: '',
      settings: DEFAULT_AGENT_SETTINGS,
      createdBy: u!.id,
    });
    return { orgId, agentId: agent.id, humans: [owner, admin, member], gone };
  }

  /** Publishes an approval.created envelope as the approvals relay does; returns the event id. */
  async function publish(orgId: string, data: Record<string, unknown>, id = randomUUID(), msgId = id) {
    await waitFor(async () => (await publisher.ready()) !== undefined, 20000);
    const { js } = (await publisher.ready())!;
    const envelope = {
      id,
      type: 'approval.created',
      created_at: new Date().toISOString(),
      org_id: orgId,
      data,
    };
    await js.publish(subjectFor(prefix, 'approval.created'), JSON.stringify(envelope), { msgID: msgId });
    return id;
  }

  const processed = async (id: string) =>
    (
      await pool.query(`SELECT 1 FROM identity.inbox WHERE consumer = $1 AND event_id = $2`, [
        APPROVAL_MAIL_CONSUMER,
        id,
      ])
    ).rowCount === 1;

  const approval = (orgId: string, agentId: string, extra: Record<string, unknown> = {}) => ({
    approval_id: randomUUID(),
    org_id: orgId,
    agent_id: agentId,
    action: 'agent_transaction',
    target_type: 'transaction',
    target_id: randomUUID(),
    risk_tier: 2,
    kind: 'consensus',
    title: 'Pay invoice 42',
    expires_at: '2030-01-02T03:04:05.000Z',
    ...extra,
  });

  const to = (id: string) => smtp.messages.filter((m) => m.text.includes(`/approvals/${id}`));

  it('mails each live human of the org once, with the link, action, tier and title; a redelivery mails nothing', async () => {
    const o = await orgWithAgent();
    const data = approval(o.orgId, o.agentId);
    const eventId = await publish(o.orgId, data);
    await waitFor(async () => to(data.approval_id).length === 3, 20000);
    const mails = to(data.approval_id);
    expect(mails.map((m) => m.to).sort()).toEqual([...o.humans].sort());
    const m = mails[0]!;
    expect(m.subject).toBe('Approval requested: agent_transaction (tier 2)');
    expect(m.text).toContain(`${BASE}/approvals/${data.approval_id}`);
    expect(m.text).toContain('The agent "Payroll bot"');
    expect(m.text).toContain('Risk tier:  2');
    expect(m.text).toContain('    "Pay invoice 42"');
    expect(m.text).toContain('several approvers (consensus)');
    expect(m.text).toContain('Wed, 02 Jan 2030 03:04:05 GMT');
    expect(smtp.messages.some((x) => x.to === o.gone)).toBe(false);
    expect(await processed(eventId)).toBe(true);

    // The same event again (a relay retry that JetStream's dedupe window missed), then a new one:
    // once the new one is mailed, the first has been handled again, and sent nothing.
    await publish(o.orgId, data, eventId, randomUUID());
    const next = approval(o.orgId, o.agentId, { risk_tier: 1, kind: 'single' });
    await publish(o.orgId, next);
    await waitFor(async () => to(next.approval_id).length === 3, 20000);
    // Every delivery acknowledged: the repeated event was handled, not still on its way.
    const { jsm } = (await publisher.ready())!;
    await waitFor(async () => {
      const info = await jsm.consumers.info(stream, APPROVAL_MAIL_CONSUMER);
      return info.num_pending === 0 && info.num_ack_pending === 0;
    }, 20000);
    expect(to(data.approval_id)).toHaveLength(3);
    expect(to(next.approval_id)[0]!.text).toContain('one approver');
  });

  it('keeps the agent’s title to one plain line: no header, no extra line, no hidden text', async () => {
    const o = await orgWithAgent();
    const data = approval(o.orgId, o.agentId, {
      title: `Pay\r\nBcc: thief@evil.test\r\n\r\nhttps://evil.test/approve \u202eevil\u202c${'x'.repeat(400)}`,
      risk_tier: 3,
    });
    await publish(o.orgId, data);
    await waitFor(async () => to(data.approval_id).length === 3, 20000);
    const m = to(data.approval_id)[0]!;
    expect(m.subject).toBe('Approval requested: agent_transaction (tier 3)');
    expect(m.raw).not.toMatch(/^Bcc:/im);
    expect(smtp.messages.some((x) => x.to === 'thief@evil.test')).toBe(false);
    const line = m.text.split('\n').find((l) => l.includes('Bcc: thief@evil.test'))!;
    expect(line).toMatch(/^ {4}"Pay Bcc: thief@evil\.test https:\/\/evil\.test\/approve evilx+\.\.\."$/);
    expect(line.length).toBeLessThanOrEqual(4 + 2 + 200);
    expect(m.text).not.toContain('\u202e');
    expect(m.text).toContain('a TOTP code from your authenticator');
  });

  it('drops a malformed event, or one naming another org’s agent, mailing nobody', async () => {
    const o = await orgWithAgent();
    const other = await orgWithAgent();
    const cases = [
      approval(o.orgId, other.agentId),
      approval(o.orgId, o.agentId, { action: 'Pay\nme' }),
      approval(o.orgId, o.agentId, { risk_tier: 7 }),
      approval(o.orgId, o.agentId, { approval_id: '../../x' }),
      approval(o.orgId, o.agentId, { org_id: other.orgId }),
    ];
    const ids = [];
    for (const data of cases) ids.push(await publish(o.orgId, data));
    await waitFor(async () => (await Promise.all(ids.map(processed))).every(Boolean), 20000);
    for (const data of cases) expect(to(data.approval_id)).toHaveLength(0);
    expect(smtp.messages.some((x) => [...o.humans, ...other.humans].includes(x.to))).toBe(false);
  });
});
