import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { NatsLink, inboxPrefixOf, subjectFor } from '@custos/events';
import { createLogger } from '@custos/service-kit';
import { waitFor } from '@custos/service-kit/testing';
import { api, quickUser } from '../src/api';
import { type Mesh, startMesh } from '../src/mesh';

type User = Awaited<ReturnType<typeof quickUser>>;

const logger = createLogger({ service: 'trust-nats-e2e', level: 'silent' });

// Issue 13, "done means": a process holding webhook-dispatcher's NATS credentials cannot publish an
// audit record for `secret.read` (NATS refuses another producer's subject; audit refuses the
// action on webhook-dispatcher's own) and cannot publish a `policy.created` that reaches a webhook
// (NATS refuses policy's subject; the consumer drops one disguised on an allowed subject). The
// mesh runs its own nats-server with a user per service, as the launcher always does.
describe('NATS trust: what webhook-dispatcher’s credentials can and cannot do', () => {
  let mesh: Mesh;
  let owner: User;
  let link: NatsLink;
  let prefix: string;
  const received: Array<{ path: string; body: Record<string, unknown> }> = [];
  let receiver: http.Server;
  let receiverPort: number;

  beforeAll(async () => {
    receiver = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({
          path: req.url ?? '',
          body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>,
        });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.2', resolve));
    receiverPort = (receiver.address() as AddressInfo).port;
    mesh = await startMesh({
      extraEnv: {
        EMAIL_VERIFICATION_REQUIRED: 'false',
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOWED_CIDRS: '127.0.0.2/32',
        WEBHOOK_WORKER_INTERVAL_MS: '50',
      },
    });
    owner = await quickUser(mesh);
    prefix = mesh.env['NATS_SUBJECT_PREFIX']!;
    const login = mesh.nats?.users['webhook-dispatcher'];
    if (!login) throw new Error('the mesh runs no nats-server of its own (mesh.nats is missing)');
    // Exactly how webhook-dispatcher connects: its user, password and inbox prefix.
    link = new NatsLink(
      [mesh.nats!.url],
      { stream: mesh.env['NATS_STREAM']!, subjectPrefix: prefix },
      logger,
      'trust-nats-e2e',
      { user: login.user, password: login.password, inboxPrefix: inboxPrefixOf('webhook-dispatcher') },
    );
    link.start();
    await waitFor(async () => (await link.ready()) !== undefined, 30_000);
  });

  afterAll(async () => {
    await link?.close();
    await mesh?.stop();
    await new Promise<void>((resolve) => (receiver ? receiver.close(() => resolve()) : resolve()));
  });

  const publish = async (subject: string, envelope: { id: string }) => {
    const { js } = (await link.ready())!;
    return js.publish(subject, JSON.stringify(envelope), { msgID: envelope.id });
  };

  const envelope = (type: string, data: Record<string, unknown>) => ({
    id: randomUUID(),
    type,
    created_at: new Date().toISOString(),
    org_id: owner.orgId,
    data,
  });

  /** A grant on a new vault of the owner: policy writes `policy.created` and its audit record. */
  async function realPolicy(): Promise<string> {
    const vault = await api(mesh, 'POST', '/v1/vaults', {
      token: owner.token,
      body: { name: `v-${randomBytes(3).toString('hex')}` },
    });
    expect(vault.status).toBe(201);
    const r = await api(mesh, 'POST', `/v1/vaults/${vault.body['id'] as string}/policies`, {
      token: owner.token,
      body: {
        secret_path_pattern: `p${randomBytes(3).toString('hex')}/**`,
        principal_type: 'user',
        principal_id: owner.userId,
        permissions: ['read'],
      },
    });
    expect(r.status).toBe(201);
    return r.body['id'] as string;
  }

  async function auditLog(): Promise<Array<Record<string, unknown>>> {
    const r = await api(mesh, 'GET', '/v1/audit/events?limit=1000', { token: owner.token });
    expect(r.status).toBe(200);
    return r.body['events'] as Array<Record<string, unknown>>;
  }

  it('cannot get an audit record for secret.read into the org’s chain', async () => {
    const record = (action: string) => ({
      org_id: owner.orgId,
      actor_type: 'user',
      actor_id: owner.userId,
      action,
      resource_type: 'secret',
      resource_id: 'forged/path',
      metadata: { forged: true },
      client_ip: null,
      request_id: null,
      occurred_at: new Date().toISOString(),
    });
    // Under vault-crypto's name: NATS refuses the subject.
    await expect(
      publish(
        subjectFor(prefix, 'audit.recorded', 'vault-crypto'),
        envelope('audit.recorded', record('secret.read')),
      ),
    ).rejects.toThrow(/Permissions Violation/);
    // Under its own name: NATS lets it through, and the audit service refuses the action.
    const own = envelope('audit.recorded', record('secret.read'));
    await expect(
      publish(subjectFor(prefix, 'audit.recorded', 'webhook-dispatcher'), own),
    ).resolves.toMatchObject({
      duplicate: false,
    });

    // A real audited action after the forgeries: once it is in the chain, they were handled.
    const policyId = await realPolicy();
    let events: Array<Record<string, unknown>> = [];
    await waitFor(async () => {
      events = await auditLog();
      return events.some((e) => e['action'] === 'policy.created' && e['resource_id'] === policyId);
    }, 30_000);
    expect(events.filter((e) => e['action'] === 'secret.read')).toEqual([]);
    expect(events.map((e) => e['id'])).not.toContain(own.id);
    expect(JSON.stringify(events)).not.toContain('forged');
    const verify = await api(mesh, 'GET', '/v1/audit/verify', { token: owner.token });
    expect(verify.body).toMatchObject({ chain_valid: true });
    // The audit service said why.
    await waitFor(async () =>
      (mesh.output.get('audit') ?? []).some(
        (l) => l.includes('audit record refused') && l.includes(own.id) && l.includes('webhook-dispatcher'),
      ),
    );
  });

  it('cannot publish a policy.created that reaches a webhook', async () => {
    const hook = await api(mesh, 'POST', '/v1/webhooks', {
      token: owner.token,
      body: { url: `http://127.0.0.2:${receiverPort}/hook`, events: ['policy.created'] },
    });
    expect(hook.status).toBe(201);
    const hookId = hook.body['id'] as string;
    const data = { policy_id: randomUUID(), vault_id: randomUUID(), forged: true };

    // On policy's subject: NATS refuses it.
    const direct = envelope('policy.created', data);
    await expect(publish(subjectFor(prefix, 'policy.created'), direct)).rejects.toThrow(
      /Permissions Violation/,
    );
    // Disguised on the one subject it may publish: stored, but its type is not its subject's.
    const disguised = envelope('policy.created', data);
    await publish(subjectFor(prefix, 'audit.recorded', 'webhook-dispatcher'), disguised);

    // A real policy.created after them: once it is delivered, the forgeries were handled.
    const policyId = await realPolicy();
    await waitFor(
      async () => received.some((r) => (r.body['data'] as Record<string, unknown>)['policy_id'] === policyId),
      30_000,
    );
    const ids = received.map((r) => r.body['id']);
    expect(ids).not.toContain(direct.id);
    expect(ids).not.toContain(disguised.id);
    expect(JSON.stringify(received)).not.toContain('forged');
    const deliveries = await api(mesh, 'GET', `/v1/webhooks/${hookId}/deliveries`, { token: owner.token });
    const delivered = (deliveries.body['deliveries'] as Array<{ event_id: string }>).map((d) => d.event_id);
    expect(delivered).not.toContain(disguised.id);
    expect(delivered).not.toContain(direct.id);
    expect(delivered.length).toBeGreaterThan(0);
  });

  it('cannot delete or purge the event stream', async () => {
    const { jsm } = (await link.ready())!;
    await expect(jsm.streams.delete(mesh.env['NATS_STREAM']!)).rejects.toThrow(/Permissions Violation/);
    await expect(jsm.streams.purge(mesh.env['NATS_STREAM']!)).rejects.toThrow(/Permissions Violation/);
  });
});
