import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { TokenVerifier } from '@custos/auth';
import {
  type Database,
  createDatabase,
  createLogger,
  createPool,
  migrateSchema,
  runWithRequestContext,
} from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { SCHEMA } from '../src/db/schema';
import { identityGrpc } from '../src/grpc/identity-grpc';
import { localKeySource } from '../src/tokens/local-keys';
import { SigningKeyRing } from '../src/tokens/signing-key-store';
import { TokenIssuer } from '../src/tokens/token-issuer';

// MintServiceToken: the gateway hands each peer the caller's token re-signed for that peer alone.

const logger = createLogger({ service: 'identity-test', level: 'silent' });
const settings = { issuers: ['http://custos.test'], audience: 'custos-api', userAccessTtlSeconds: 900 };
const user = {
  id: '11111111-1111-4111-8111-111111111111',
  orgId: '22222222-2222-4222-8222-222222222222',
  role: 'owner',
};

function claimsOf(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as Record<
    string,
    unknown
  >;
}

describe('MintServiceToken', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let db: Database;
  let ring: SigningKeyRing;
  let service: ReturnType<typeof identityGrpc>;
  let issuer: TokenIssuer;
  const revoked = new Set<string>();
  const verifierFor = (audience: string) =>
    new TokenVerifier({
      keys: localKeySource(ring),
      issuers: settings.issuers,
      audience,
      cacheSize: 0,
      isRevoked: async (p) => revoked.has(p.tokenId),
    });

  beforeAll(async () => {
    database = await createTestDatabase('custos_identity_svc_token');
    pool = createPool(database.url, 4, logger, 'svc-token-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    db = createDatabase(pool);
    ring = new SigningKeyRing(
      db,
      { kek: randomBytes(32), rotationMs: 60_000, retiredKeyTtlMs: 86_400_000 },
      logger,
    );
    await ring.refresh();
    issuer = new TokenIssuer(ring, settings);
    // Only the token parts of the adapter are used here.
    service = identityGrpc({
      ring,
      settings,
      verifier: verifierFor(settings.audience),
    } as unknown as Parameters<typeof identityGrpc>[0]);
  });
  afterAll(async () => {
    await pool.end();
    await database.drop();
  });

  const mint = (authorization: string | undefined, svc: string) =>
    runWithRequestContext({ requestId: 'r1', ...(authorization ? { authorization } : {}) }, () =>
      service.mintServiceToken({ service: svc }, {} as never),
    );

  it('re-signs the same claims with only the audience changed, for that service alone', async () => {
    const userToken = issuer.userAccessToken(user, { id: 'sess-1', amr: ['pwd'] }).token;
    const r = await mint(`Bearer ${userToken}`, 'webhook-dispatcher');
    const original = claimsOf(userToken);
    const minted = claimsOf(r.accessToken);
    expect(minted).toEqual({ ...original, aud: 'custos-api:webhook-dispatcher' });
    expect(minted['jti']).toBe(original['jti']);
    expect(Number(r.expiresAt)).toBe(original['exp']);

    // The service it names accepts it; the public API and every other service refuse it.
    await expect(verifierFor('custos-api:webhook-dispatcher').verify(r.accessToken)).resolves.toMatchObject({
      userId: user.id,
      sessionId: 'sess-1',
      tokenId: original['jti'],
    });
    await expect(verifierFor('custos-api').verify(r.accessToken)).rejects.toMatchObject({
      reason: 'wrong_audience',
    });
    await expect(verifierFor('custos-api:vault-crypto').verify(r.accessToken)).rejects.toMatchObject({
      reason: 'wrong_audience',
    });
    // A service token is not a public token: it cannot be turned into one for another service.
    await expect(mint(`Bearer ${r.accessToken}`, 'vault-crypto')).rejects.toMatchObject({
      kind: 'unauthenticated',
    });
  });

  it('refuses a missing, tampered or revoked token, and revoking the user token revokes the service token', async () => {
    const t = issuer.userAccessToken(user, { id: 'sess-2', amr: ['pwd'] });
    await expect(mint(undefined, 'vault-crypto')).rejects.toMatchObject({ kind: 'unauthenticated' });
    const [h, p, s] = t.token.split('.');
    const forged = `${h}.${Buffer.from(JSON.stringify({ ...claimsOf(t.token), role: 'admin' })).toString('base64url')}.${s}`;
    expect(p).not.toBe(forged.split('.')[1]);
    await expect(mint(`Bearer ${forged}`, 'vault-crypto')).rejects.toMatchObject({ kind: 'unauthenticated' });

    const minted = await mint(`Bearer ${t.token}`, 'vault-crypto');
    const vc = verifierFor('custos-api:vault-crypto');
    await expect(vc.verify(minted.accessToken)).resolves.toMatchObject({ userId: user.id });
    revoked.add(t.jti);
    await expect(mint(`Bearer ${t.token}`, 'vault-crypto')).rejects.toMatchObject({
      kind: 'unauthenticated',
    });
    await expect(vc.verify(minted.accessToken)).rejects.toMatchObject({ reason: 'revoked' });
  });

  it('mints only for the services behind the gateway', async () => {
    const token = `Bearer ${issuer.userAccessToken(user, { id: 'sess-3', amr: ['pwd'] }).token}`;
    for (const svc of ['gateway', 'identity', 'custos-api', '', 'vault-crypto:x']) {
      await expect(mint(token, svc)).rejects.toMatchObject({ kind: 'invalid_argument' });
    }
    for (const svc of [
      'vault-crypto',
      'policy',
      'signer',
      'approvals',
      'audit',
      'webhook-dispatcher',
      'billing',
    ]) {
      await expect(mint(token, svc)).resolves.toMatchObject({ accessToken: expect.any(String) });
    }
  });
});
