import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { ChannelCredentials, Metadata, credentials } from '@grpc/grpc-js';
import { HealthClient, HealthCheckResponse_ServingStatus } from '@custos/proto/grpc/health/v1/health';
import { IdentityServiceClient } from '@custos/proto/custos/identity/v1/service';
import { PolicyServiceClient } from '@custos/proto/custos/policy/v1/service';
import { VaultCryptoServiceClient } from '@custos/proto/custos/vault_crypto/v1/service';
import { callUnary } from '@custos/service-kit';
import { TEST_PASSWORD, api, quickUser } from '../src/api';
import { SERVICES, type Mesh, sharedMesh } from '../src/mesh';
import { certFilesOf, grpcAddress, grpcClientAs } from '../src/mesh-grpc';

// Issue 13: every part of the mesh proves who it is. A process holding webhook-dispatcher's
// certificate (the service that talks to attacker-chosen URLs) is a member of the mesh, and still
// cannot call the RPCs that read or write secrets, sign in users or manage grants; a process with no
// certificate cannot talk to any service at all; a client address only counts from the gateway.

type User = Awaited<ReturnType<typeof quickUser>>;

describe('gRPC between services: mTLS and per-RPC caller allow-lists', () => {
  let mesh: Mesh;
  let owner: User;
  let vaultId: string;

  beforeAll(async () => {
    mesh = await sharedMesh();
    owner = await quickUser(mesh);
    const v = await api(mesh, 'POST', '/v1/vaults', {
      token: owner.token,
      body: { name: `trust-${randomBytes(3).toString('hex')}` },
    });
    expect(v.status).toBe(201);
    vaultId = v.body['id'] as string;
    const put = await api(mesh, 'PUT', `/v1/vaults/${vaultId}/secrets/net/key`, {
      token: owner.token,
      body: { value: 'office-only' },
    });
    expect(put.status).toBe(201);
  });

  /** The owner's real JWT in metadata, as a service that was handed it might relay it. */
  const relayed = () => {
    const md = new Metadata();
    md.set('authorization', `Bearer ${owner.token}`);
    md.set('x-custos-client-ip', '203.0.113.9');
    return md;
  };

  it("refuses webhook-dispatcher's certificate on vault-crypto's secret RPCs, even with a user's JWT", async () => {
    const { client: vc, close } = grpcClientAs(
      mesh,
      'webhook-dispatcher',
      VaultCryptoServiceClient,
      'vault-crypto',
    );
    try {
      await expect(
        callUnary(vc, vc.getSecret, { vaultId, path: 'net/key', version: 0, passkeyToken: '' }, relayed()),
      ).rejects.toMatchObject({ kind: 'permission_denied' });
      await expect(callUnary(vc, vc.listSecrets, { vaultId, prefix: '' }, relayed())).rejects.toMatchObject({
        kind: 'permission_denied',
      });
      await expect(
        callUnary(
          vc,
          vc.putSecret,
          { vaultId, path: 'net/key', type: 'note', value: Buffer.from('overwritten') },
          relayed(),
        ),
      ).rejects.toMatchObject({ kind: 'permission_denied' });
    } finally {
      close();
    }
    // Nothing was written: the owner still reads the original value through the gateway.
    const read = await api(mesh, 'GET', `/v1/vaults/${vaultId}/secrets/net/key`, { token: owner.token });
    expect(read.body).toMatchObject({ value: 'office-only' });
  });

  it("refuses webhook-dispatcher's certificate on identity's Login and policy's CreatePolicy", async () => {
    const id = grpcClientAs(mesh, 'webhook-dispatcher', IdentityServiceClient, 'identity');
    const pol = grpcClientAs(mesh, 'webhook-dispatcher', PolicyServiceClient, 'policy');
    try {
      await expect(
        callUnary(
          id.client,
          id.client.login,
          { email: owner.email, password: TEST_PASSWORD },
          new Metadata(),
        ),
      ).rejects.toMatchObject({ kind: 'permission_denied' });
      await expect(
        callUnary(
          pol.client,
          pol.client.createPolicy,
          {
            vaultId,
            vault: {
              vaultId,
              orgId: owner.orgId,
              createdBy: owner.userId,
              createdByType: 'user',
              isSystem: false,
            },
            grant: {
              secretPathPattern: '*',
              principalType: 'user',
              principalId: owner.userId,
              permissions: ['read', 'write'],
            },
            principalInOrg: true,
          },
          relayed(),
        ),
      ).rejects.toMatchObject({ kind: 'permission_denied' });
    } finally {
      id.close();
      pol.close();
    }
    // The same sign-in through the gateway works: the refusal was the caller, not the request.
    const login = await api(mesh, 'POST', '/v1/auth/token', {
      body: { email: owner.email, password: TEST_PASSWORD },
    });
    expect(login.status).toBe(200);
  });

  it('refuses a plaintext call and a certificate-less TLS call to every service', async () => {
    const ca = fs.readFileSync(certFilesOf(mesh, 'gateway').caFile);
    const options = { 'grpc.enable_retries': 0 };
    for (const service of SERVICES) {
      const addr = grpcAddress(mesh, service);
      const ask = (c: HealthClient) =>
        callUnary(c, c.check, { service: '' }, new Metadata(), { deadline: Date.now() + 3000 });
      const plain = new HealthClient(addr, credentials.createInsecure(), options);
      await expect(ask(plain)).rejects.toMatchObject({ kind: 'unavailable' });
      plain.close();
      const noCert = new HealthClient(
        addr,
        ChannelCredentials.createSsl(ca, null, null, { checkServerIdentity: () => undefined }),
        { ...options, 'grpc.ssl_target_name_override': service },
      );
      await expect(ask(noCert)).rejects.toMatchObject({ kind: 'unavailable' });
      noCert.close();
      // With a mesh certificate (any service's) the same question is answered.
      const member = grpcClientAs(mesh, 'webhook-dispatcher', HealthClient, service);
      await expect(ask(member.client)).resolves.toMatchObject({
        status: HealthCheckResponse_ServingStatus.SERVING,
      });
      member.close();
    }
  });

  it('ignores a client address in metadata from anyone but the gateway', async () => {
    // An agent whose grant holds only from 203.0.113.0/24.
    const created = await api(mesh, 'POST', '/v1/agents', {
      token: owner.token,
      body: { name: `net-bot-${randomBytes(3).toString('hex')}` },
    });
    expect(created.status).toBe(201);
    const agentId = (created.body['agent'] as { id: string }).id;
    const g = await api(mesh, 'POST', `/v1/vaults/${vaultId}/policies`, {
      token: owner.token,
      body: {
        secret_path_pattern: 'net/*',
        principal_type: 'agent',
        principal_id: agentId,
        permissions: ['read'],
        conditions: { ip_cidrs: ['203.0.113.0/24'] },
      },
    });
    expect(g.status).toBe(201);
    const question = (clientIp: string) => ({
      vaultId,
      vaultOrgId: owner.orgId,
      path: 'net/key',
      permission: 'read',
      principal: { type: 'agent', id: agentId, orgId: owner.orgId, environment: '' },
      clientIp,
    });

    // Vault-crypto is the one service policy answers Decide for. An address it puts in metadata
    // (as if the gateway had resolved it) does not count: Decide reads the typed field, and the
    // server drops the metadata from any certificate but the gateway's (that rule itself is
    // tested in packages/service-kit/test/mesh-tls.spec.ts, "believes the JWT and client IP from
    // the gateway only"; this checks the two together on the real mesh).
    const vc = grpcClientAs(mesh, 'vault-crypto', PolicyServiceClient, 'policy');
    const hook = grpcClientAs(mesh, 'webhook-dispatcher', PolicyServiceClient, 'policy');
    try {
      const spoofed = new Metadata();
      spoofed.set('x-custos-client-ip', '203.0.113.9');
      const fromMetadata = await callUnary(vc.client, vc.client.decide, question(''), spoofed);
      expect(fromMetadata).toMatchObject({ allowed: false, reason: 'no_match' });
      // The address vault-crypto was given by the gateway travels as a field and counts.
      const fromField = await callUnary(vc.client, vc.client.decide, question('203.0.113.9'), new Metadata());
      expect(fromField).toMatchObject({ allowed: true, reason: 'allow' });
      expect(
        await callUnary(vc.client, vc.client.decide, question('198.51.100.4'), new Metadata()),
      ).toMatchObject({ allowed: false });
      // Webhook-dispatcher may not ask at all.
      await expect(
        callUnary(hook.client, hook.client.decide, question('203.0.113.9'), spoofed),
      ).rejects.toMatchObject({ kind: 'permission_denied' });
    } finally {
      vc.close();
      hook.close();
    }
  });
});
