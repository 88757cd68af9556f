import path from 'node:path';
import { Redis } from 'ioredis';
import { TokenVerifier, redisRevocationCheck } from '@custos/auth';
import { runDataService } from '@custos/events';
import { BillingServiceClient } from '@custos/proto/custos/billing/v1/service';
import { IdentityServiceService } from '@custos/proto/custos/identity/v1/service';
import { MfaServiceService } from '@custos/proto/custos/identity/v1/mfa';
import { OrgServiceService } from '@custos/proto/custos/identity/v1/orgs';
import { PolicyServiceClient } from '@custos/proto/custos/policy/v1/service';
import { createGrpcClient, describeError } from '@custos/service-kit';
import { AccountServiceService, accountService } from './account/account-module.js';
import { AgentExchangeService } from './agents/agent-exchange-service.js';
import { AgentService } from './agents/agent-service.js';
import { AgentStore } from './agents/agent-store.js';
import { RouterKeyService } from './agents/router-key-service.js';
import { RouterKeyStore } from './agents/router-key-store.js';
import { RouterKeyServiceService } from '@custos/proto/custos/identity/v1/router_keys';
import { routerKeyGrpc } from './grpc/router-key-grpc.js';
import { BillingClient } from './peers/billing-client.js';
import { PolicyClient } from './peers/policy-client.js';
import { configShape } from './config.js';
import { PersonalKeyService } from './keys/personal-key-service.js';
import { loadFederationKey } from './federation/federation-fns.js';
import { FederationServiceService, federationService } from './federation/federation-grpc.js';
import { SCHEMA } from './db/schema.js';
import { identityGrpc } from './grpc/identity-grpc.js';
import { createMailer } from './mail/mailer.js';
import { MfaChallengeIssuer } from './mfa/mfa-challenges.js';
import { mfaGrpc } from './mfa/mfa-grpc.js';
import { MfaService } from './mfa/mfa-service.js';
import { MfaStore } from './mfa/mfa-store.js';
import { orgsGrpc } from './orgs/orgs-grpc.js';
import { localKeySource } from './tokens/local-keys.js';
import { startShareMailConsumer } from './shares/share-mail-consumer.js';
import { RevocationStore } from './tokens/revocation-store.js';
import { SigningKeyRing } from './tokens/signing-key-store.js';
import { TokenIssuer } from './tokens/token-issuer.js';
import { UserService } from './users/user-service.js';
import { UserStore } from './users/user-store.js';

const DAY_MS = 86_400_000;
/** The longest lifetime any Custos token can have (agent tokens are capped at a day). */
const MAX_TOKEN_TTL_MS = DAY_MS;

// Composition root of identity: key ring, revocations, mail, the rules, the gRPC adapter.
runDataService({
  name: 'identity',
  schema: SCHEMA,
  migrationsFolder: path.join(__dirname, '..', 'migrations'),
  configShape,
  async start(rt, { db, events }) {
    const c = rt.config;
    const mailer = createMailer(c, rt.logger);
    const redis = new Redis(c.REDIS_URL, { maxRetriesPerRequest: 1, lazyConnect: true });
    redis.on('error', (err) => rt.logger.warn({ err: describeError(err) }, 'redis error'));
    rt.onShutdown('redis', async () => {
      redis.disconnect();
    });
    await redis
      .connect()
      .catch((err: unknown) => rt.logger.warn({ err: describeError(err) }, 'redis unreachable at start'));

    const ring = new SigningKeyRing(
      db,
      {
        kek: c.TOKEN_SIGNING_KEK,
        rotationMs: c.SIGNING_KEY_ROTATION_DAYS * DAY_MS,
        retiredKeyTtlMs: MAX_TOKEN_TTL_MS,
      },
      rt.logger,
    );
    await ring.refresh();
    const revocations = new RevocationStore(db, redis, rt.logger);
    await revocations
      .republish()
      .catch((err: unknown) => rt.logger.warn({ err: describeError(err) }, 'revocations not republished'));
    // Every minute: pick up keys rotated by another replica, and re-seed Redis after a restart of it.
    const timer = setInterval(() => {
      ring
        .refresh()
        .catch((err: unknown) => rt.logger.error({ err: describeError(err) }, 'signing key refresh failed'));
      revocations
        .republish()
        .catch((err: unknown) => rt.logger.warn({ err: describeError(err) }, 'revocations not republished'));
    }, 60_000);
    timer.unref();
    rt.onShutdown('timers', async () => clearInterval(timer));

    const settings = {
      issuers: [c.TOKEN_ISSUER, ...c.TOKEN_LEGACY_ISSUERS],
      audience: c.TOKEN_AUDIENCE,
      userAccessTtlSeconds: c.ACCESS_TOKEN_TTL_SECONDS,
      platformAdminEmails: c.PLATFORM_ADMIN_EMAILS,
    };
    const verifier = new TokenVerifier({
      keys: localKeySource(ring),
      issuers: settings.issuers,
      audience: settings.audience,
      isRevoked: redisRevocationCheck(redis),
    });
    const issuer = new TokenIssuer(ring, settings);
    const peerOpts = { deadlineMs: c.GRPC_DEADLINE_MS };
    const billing = createGrpcClient(BillingServiceClient, c.BILLING_ADDR, peerOpts);
    const policy = createGrpcClient(PolicyServiceClient, c.POLICY_ADDR, peerOpts);
    rt.onShutdown('peers', async () => {
      billing.close();
      policy.close();
    });
    const policyClient = new PolicyClient(policy);
    const agentStore = new AgentStore(db);
    const routerKeyStore = new RouterKeyStore(db);
    const agents = new AgentService(agentStore, revocations, new BillingClient(billing));
    const agentExchange = new AgentExchangeService(agentStore, routerKeyStore, issuer, policyClient);
    const userStore = new UserStore(db);
    const keys = new PersonalKeyService(db, userStore, issuer, revocations);
    const users = new UserService(
      userStore,
      issuer,
      revocations,
      mailer,
      {
        refreshTtlSeconds: c.REFRESH_TOKEN_TTL_SECONDS,
        verificationTtlSeconds: c.EMAIL_VERIFICATION_TTL_SECONDS,
        requireEmailVerification: c.EMAIL_VERIFICATION_REQUIRED,
        publicBaseUrl: c.PUBLIC_BASE_URL,
      },
      rt.logger,
      new MfaChallengeIssuer(new MfaStore(db)),
    );
    // Links of shares to external e-mail addresses, requested by vault-crypto through its outbox.
    const shareMail = startShareMailConsumer({
      events,
      db,
      mailer,
      publicBaseUrl: c.PUBLIC_BASE_URL,
      logger: rt.logger,
    });
    rt.onShutdown('share-mail', () => shareMail.stop());
    const federationKey = loadFederationKey(c);
    rt.grpc.add(
      IdentityServiceService,
      identityGrpc({
        users,
        agents,
        agentExchange,
        keys,
        ring,
        settings,
        verifier,
        extraJwks: federationKey && [federationKey.publicJwk],
      }),
    );
    // Further identity RPC services (MFA, account security, orgs) register below, one line each,
    // with the dependencies above.
    rt.grpc.add(
      AccountServiceService,
      accountService({
        db,
        users: userStore,
        revocations,
        mailer,
        verifier,
        publicBaseUrl: c.PUBLIC_BASE_URL,
        logger: rt.logger,
      }),
    );
    rt.grpc.add(
      OrgServiceService,
      orgsGrpc({
        db,
        issuer,
        revocations,
        mailer,
        verifier,
        logger: rt.logger,
        publicBaseUrl: c.PUBLIC_BASE_URL,
        maxPendingInvites: c.ORG_MAX_PENDING_INVITES,
      }),
    );
    rt.grpc.add(
      MfaServiceService,
      mfaGrpc({ mfa: new MfaService(new MfaStore(db), users, { kek: c.TOKEN_SIGNING_KEK }), verifier }),
    );
    rt.grpc.add(
      RouterKeyServiceService,
      routerKeyGrpc({ routerKeys: new RouterKeyService(routerKeyStore, agentStore, revocations), verifier }),
    );
    rt.grpc.add(
      FederationServiceService,
      federationService({
        db,
        verifier,
        users,
        key: federationKey,
        issuer: settings.issuers[0]!,
        policy: policyClient,
        google: { clientIds: c.GOOGLE_CLIENT_IDS, issuers: c.GOOGLE_ISSUERS, jwksUrl: c.GOOGLE_JWKS_URL },
      }),
    );
  },
});
