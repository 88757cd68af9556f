import { randomBytes } from 'node:crypto';
import { Metadata } from '@grpc/grpc-js';
import { IdentityServiceClient } from '@custos/proto/custos/identity/v1/service';
import { VaultCryptoServiceClient } from '@custos/proto/custos/vault_crypto/v1/service';
import { callUnary } from '@custos/service-kit';
import { api, quickUser } from '../src/api';
import { type Mesh, sharedMesh } from '../src/mesh';
import { grpcClientAs } from '../src/mesh-grpc';

// Issue 13: a service behind the gateway never holds a token anything else accepts. The gateway
// hands each peer the user's token re-signed by identity for that peer alone (audience
// `custos-api:<peer>`): a held webhook-dispatcher cannot replay what it sees at the public API,
// at vault-crypto, or turn it into a token for anyone else.

type User = Awaited<ReturnType<typeof quickUser>>;

function claimsOf(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as Record<
    string,
    unknown
  >;
}

function bearer(token: string): Metadata {
  const md = new Metadata();
  md.set('authorization', `Bearer ${token}`);
  return md;
}

describe('service tokens: what a peer sees cannot be replayed', () => {
  let mesh: Mesh;
  let owner: User;
  let vaultId: string;

  beforeAll(async () => {
    mesh = await sharedMesh('default');
    owner = await quickUser(mesh);
    const v = await api(mesh, 'POST', '/v1/vaults', {
      token: owner.token,
      body: { name: `replay-${randomBytes(3).toString('hex')}` },
    });
    expect(v.status).toBe(201);
    vaultId = v.body['id'] as string;
  });

  /** MintServiceToken as the gateway (its certificate) for the owner's token. */
  async function mintAsGateway(service: string, token = owner.token) {
    const { client, close } = grpcClientAs(mesh, 'gateway', IdentityServiceClient, 'identity');
    try {
      return await callUnary(client, client.mintServiceToken, { service }, bearer(token));
    } finally {
      close();
    }
  }

  it('mints the same claims for one service; the public API refuses that token', async () => {
    const minted = await mintAsGateway('webhook-dispatcher');
    const original = claimsOf(owner.token);
    expect(claimsOf(minted.accessToken)).toEqual({
      ...original,
      aud: `${original['aud']}:webhook-dispatcher`,
    });
    expect(Number(minted.expiresAt)).toBe(original['exp']);

    const replay = await api(mesh, 'GET', '/v1/vaults', { token: minted.accessToken });
    expect(replay.status).toBe(401);
    const own = await api(mesh, 'GET', '/v1/vaults', { token: owner.token });
    expect(own.status).toBe(200);
  });

  it("refuses MintServiceToken to webhook-dispatcher's certificate, and a service token as input", async () => {
    const { client, close } = grpcClientAs(mesh, 'webhook-dispatcher', IdentityServiceClient, 'identity');
    try {
      await expect(
        callUnary(client, client.mintServiceToken, { service: 'vault-crypto' }, bearer(owner.token)),
      ).rejects.toMatchObject({ kind: 'permission_denied' });
    } finally {
      close();
    }
    const forWebhooks = await mintAsGateway('webhook-dispatcher');
    await expect(mintAsGateway('vault-crypto', forWebhooks.accessToken)).rejects.toMatchObject({
      kind: 'unauthenticated',
    });
    await expect(mintAsGateway('gateway')).rejects.toMatchObject({ kind: 'invalid_argument' });
  });

  it("vault-crypto accepts only a token minted for it, not one minted for webhook-dispatcher or the user's own", async () => {
    const forWebhooks = await mintAsGateway('webhook-dispatcher');
    const forVaults = await mintAsGateway('vault-crypto');
    const { client: vc, close } = grpcClientAs(mesh, 'gateway', VaultCryptoServiceClient, 'vault-crypto');
    try {
      await expect(callUnary(vc, vc.listVaults, {}, bearer(forWebhooks.accessToken))).rejects.toMatchObject({
        kind: 'unauthenticated',
      });
      await expect(
        callUnary(
          vc,
          vc.getSecret,
          { vaultId, path: 'none/here', version: 0, passkeyToken: '' },
          bearer(forWebhooks.accessToken),
        ),
      ).rejects.toMatchObject({ kind: 'unauthenticated' });
      // The raw user token is no longer what a peer accepts either.
      await expect(callUnary(vc, vc.listVaults, {}, bearer(owner.token))).rejects.toMatchObject({
        kind: 'unauthenticated',
      });
      const listed = await callUnary(vc, vc.listVaults, {}, bearer(forVaults.accessToken));
      expect(listed.vaults.map((v) => v.id)).toContain(vaultId);
    } finally {
      close();
    }
  });

  it('signing out ends the service tokens minted from the session', async () => {
    const user = await quickUser(mesh);
    const { client: vc, close } = grpcClientAs(mesh, 'gateway', VaultCryptoServiceClient, 'vault-crypto');
    try {
      const forVaults = await mintAsGateway('vault-crypto', user.token);
      await expect(callUnary(vc, vc.listVaults, {}, bearer(forVaults.accessToken))).resolves.toBeDefined();
      const out = await api(mesh, 'DELETE', '/v1/auth/token', { token: user.token });
      expect(out.status).toBe(204);
      await expect(callUnary(vc, vc.listVaults, {}, bearer(forVaults.accessToken))).rejects.toMatchObject({
        kind: 'unauthenticated',
      });
      await expect(mintAsGateway('vault-crypto', user.token)).rejects.toMatchObject({
        kind: 'unauthenticated',
      });
    } finally {
      close();
    }
  });
});
