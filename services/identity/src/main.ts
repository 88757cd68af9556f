import { OutboxGroupCommit, runDataService, startServiceEventMetrics } from '@custos/events';
import { BillingServiceClient } from '@custos/proto/custos/billing/v1/service';
import { AccountServiceService } from '@custos/proto/custos/identity/v1/account';
import { FederationServiceService } from '@custos/proto/custos/identity/v1/federation';
import { MfaServiceService } from '@custos/proto/custos/identity/v1/mfa';
import { OrgServiceService } from '@custos/proto/custos/identity/v1/orgs';
import { RouterKeyServiceService } from '@custos/proto/custos/identity/v1/router_keys';
import { IdentityServiceService } from '@custos/proto/custos/identity/v1/service';
import { PolicyServiceClient } from '@custos/proto/custos/policy/v1/service';
import { VaultCryptoServiceClient } from '@custos/proto/custos/vault_crypto/v1/service';
import { createGrpcClient } from '@custos/service-kit';
import { configShape } from './config.js';
import { SCHEMA } from './db/schema.js';
import { startApprovalCreatedConsumer } from './events/approval-created-consumer.js';
import { startShareEmailRequestedConsumer } from './events/share-email-requested-consumer.js';
import { AgentStore } from './agents/agent-store.js';
import { OrgStore } from './orgs/org-store.js';
import { loadFederationKey } from './federation/federation-fns.js';
import { accountGrpc } from './grpc/account-grpc.js';
import { JWKS_READERS, gatewayOnly } from './grpc/caller.js';
import { federationGrpc } from './grpc/federation-grpc.js';
import { identityGrpc } from './grpc/identity-grpc.js';
import { mfaGrpc } from './grpc/mfa-grpc.js';
import { orgsGrpc } from './grpc/orgs-grpc.js';
import { routerKeyGrpc } from './grpc/router-key-grpc.js';
import { configurePasswordHashing } from './credentials/password-fns.js';
import { createMailer } from './notifications/mailer.js';
import { Notifier } from './notifications/notifier.js';
import { BillingClient } from './peers/billing-client.js';
import { PolicyClient } from './peers/policy-client.js';
import { VaultCryptoClient } from './peers/vault-crypto-client.js';
import { buildAgents } from './wiring/agents.js';
import { buildPeople } from './wiring/people.js';
import { buildTokens } from './wiring/tokens.js';

// Composition root of identity: every object is built here or by a wiring/ function it calls.
runDataService({
  name: 'identity',
  schema: SCHEMA,
  configShape,
  async start(rt, { db, pool, events }) {
    // Outbox backlog and consumer lag (custos_outbox_*, custos_nats_consumer_*) on /metrics.
    startServiceEventMetrics(rt, { pool, schema: SCHEMA, events });
    const c = rt.config;
    await configurePasswordHashing({
      memoryCost: c.ARGON2_MEMORY_KIB,
      timeCost: c.ARGON2_TIME_COST,
      parallelism: c.ARGON2_PARALLELISM,
    });
    const notifier = new Notifier(createMailer(c, rt.logger), c.PUBLIC_BASE_URL);
    const tokens = await buildTokens(rt, db);

    const peerOpts = { tls: rt.tls, deadlineMs: c.GRPC_DEADLINE_MS };
    const billing = createGrpcClient(BillingServiceClient, c.BILLING_ADDR, { ...peerOpts, peer: 'billing' });
    const policy = createGrpcClient(PolicyServiceClient, c.POLICY_ADDR, { ...peerOpts, peer: 'policy' });
    const vaultCrypto = createGrpcClient(VaultCryptoServiceClient, c.VAULT_CRYPTO_ADDR, {
      ...peerOpts,
      peer: 'vault-crypto',
    });
    rt.onShutdown('peers', async () => {
      billing.close();
      policy.close();
      vaultCrypto.close();
    });

    const people = buildPeople({
      db,
      tokens,
      notifier,
      logger: rt.logger,
      settings: {
        refreshTtlSeconds: c.REFRESH_TOKEN_TTL_SECONDS,
        familyTtlSeconds: c.REFRESH_TOKEN_FAMILY_TTL_SECONDS,
        signups: { mode: c.SIGNUP_MODE, adminEmailsConfigured: c.PLATFORM_ADMIN_EMAILS.length > 0 },
        verificationTtlSeconds: c.EMAIL_VERIFICATION_TTL_SECONDS,
        requireEmailVerification: c.EMAIL_VERIFICATION_REQUIRED,
        maxPendingInvites: c.ORG_MAX_PENDING_INVITES,
        totpKek: c.MFA_SECRET_KEY,
        google: { clientIds: c.GOOGLE_CLIENT_IDS, issuers: c.GOOGLE_ISSUERS, jwksUrl: c.GOOGLE_JWKS_URL },
        loginThrottle: {
          threshold: c.LOGIN_LOCKOUT_THRESHOLD,
          windowSeconds: c.LOGIN_LOCKOUT_WINDOW_SECONDS,
          lockSeconds: c.LOGIN_LOCKOUT_SECONDS,
          freeFailures: c.LOGIN_DELAY_FREE_FAILURES,
          baseDelayMs: c.LOGIN_DELAY_BASE_MS,
          maxDelayMs: c.LOGIN_DELAY_MAX_MS,
        },
      },
    });
    const legacyTotp = await people.mfa.resealLegacy(c.TOKEN_SIGNING_KEK);
    if (legacyTotp.resealed + legacyTotp.unreadable > 0)
      rt.logger.info(legacyTotp, 'TOTP secrets moved from TOKEN_SIGNING_KEK to MFA_SECRET_KEY');
    const federationKey = loadFederationKey(c);
    // Concurrent sign-ins' audit records share one INSERT; each waits for its own commit.
    const commits = new OutboxGroupCommit({ pool, schema: SCHEMA, onCommitted: () => events.relay.nudge() });
    const agents = buildAgents({
      db,
      pool,
      commits,
      logger: rt.logger,
      tokens,
      billing: new BillingClient(billing),
      policy: new PolicyClient(policy, {
        redis: tokens.redis,
        ttlMs: c.AGENT_SCOPES_CACHE_TTL_MS,
        size: 10_000,
      }),
      federationKey,
      stepUp: people.account.reauth,
    });

    // Links of shares to external e-mail addresses, requested by vault-crypto through its outbox.
    const shareMail = startShareEmailRequestedConsumer({
      events,
      db,
      notifier,
      vaultCrypto: new VaultCryptoClient(vaultCrypto),
      logger: rt.logger,
    });
    rt.onShutdown('share-mail', () => shareMail.stop());
    // Notices of new approvals to the org's humans, announced by the approvals service's outbox.
    const approvalMail = startApprovalCreatedConsumer({
      events,
      db,
      notifier,
      orgs: new OrgStore(db),
      agents: new AgentStore(db, pool),
      logger: rt.logger,
    });
    rt.onShutdown('approval-mail', () => approvalMail.stop());

    const { verifier } = tokens;
    rt.grpc.add(
      IdentityServiceService,
      identityGrpc({
        signups: people.signups,
        sessions: people.sessions,
        profiles: people.profiles,
        keys: people.keys,
        agents: agents.agents,
        agentExchange: agents.exchange,
        ring: tokens.ring,
        settings: tokens.settings,
        verifier,
        extraJwks: federationKey && [federationKey.publicJwk],
      }),
      // Users' requests come through the gateway; the public keys are read by every token verifier.
      // signer asks whether an agent is in the org of a caller whose token it verified itself;
      // approvals reads an agent's action_approval_policy and creator (derived tier, self-approval).
      { default: ['gateway'], methods: { getJwks: JWKS_READERS, getOrgAgent: ['signer', 'approvals'] } },
    );
    // Step-up checks of actions another service owns: vault-crypto's org key rotation, signer's
    // export and import of agents' signing keys, approvals' decisions of tier 2 and 3.
    rt.grpc.add(AccountServiceService, accountGrpc({ ...people.account, verifier }), {
      default: ['gateway'],
      methods: { confirmUserStepUp: ['vault-crypto', 'signer', 'approvals'] },
    });
    rt.grpc.add(OrgServiceService, orgsGrpc({ ...people.orgs, verifier }), gatewayOnly);
    rt.grpc.add(MfaServiceService, mfaGrpc({ mfa: people.mfa, verifier }), gatewayOnly);
    rt.grpc.add(
      RouterKeyServiceService,
      routerKeyGrpc({ routerKeys: agents.routerKeys, verifier }),
      gatewayOnly,
    );
    rt.grpc.add(
      FederationServiceService,
      federationGrpc({ federation: agents.federation, google: people.google }),
      gatewayOnly,
    );
  },
});
