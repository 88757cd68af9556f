import { StepUpClient, connectServiceIdentityKeys, verifierRedisOptions } from '@custos/auth';
import { OutboxGroupCommit, runDataService, startServiceEventMetrics } from '@custos/events';
import { Redis } from 'ioredis';
import { BillingServiceClient } from '@custos/proto/custos/billing/v1/service';
import { AccountServiceClient } from '@custos/proto/custos/identity/v1/account';
import { PolicyServiceClient } from '@custos/proto/custos/policy/v1/service';
import { AgentKeyVaultServiceService } from '@custos/proto/custos/vault_crypto/v1/agent_keys';
import { VaultCryptoServiceService } from '@custos/proto/custos/vault_crypto/v1/service';
import { createGrpcClient, describeError } from '@custos/service-kit';
import { DecisionCache } from './access/decision-cache.js';
import { AgentKeyService } from './agent-keys/agent-key-service.js';
import { AccessService } from './access/access-service.js';
import { VaultCryptoAudit } from './audit/vault-crypto-audit.js';
import { configShape } from './config.js';
import { SCHEMA, outbox } from './db/schema.js';
import { agentKeyVaultAccess, agentKeyVaultGrpc } from './grpc/agent-key-grpc.js';
import { vaultCryptoAccess, vaultCryptoGrpc } from './grpc/vault-crypto-grpc.js';
import { OrgKeyRing } from './keys/org-key-ring.js';
import { createKmsProvider } from './kms/kms-factory.js';
import { measuredKms } from './kms/kms-metrics.js';
import { BillingClient } from './peers/billing-client.js';
import { PolicyClient } from './peers/policy-client.js';
import { EnvService } from './secrets/env-service.js';
import { SecretService } from './secrets/secret-service.js';
import { SecretStore } from './secrets/secret-store.js';
import { ShareService } from './shares/share-service.js';
import { ShareStore } from './shares/share-store.js';
import { VaultService } from './vaults/vault-service.js';
import { VaultStore } from './vaults/vault-store.js';

const DAY_MS = 86_400_000;

// Composition root of vault-crypto: the KMS provider, peers, the rules, then the gRPC adapter.
runDataService({
  name: 'vault-crypto',
  schema: SCHEMA,
  configShape,
  async start(rt, { db, pool, events }) {
    // Outbox backlog and consumer lag (custos_outbox_*, custos_nats_consumer_*) on /metrics.
    startServiceEventMetrics(rt, { pool, schema: SCHEMA, events });
    const c = rt.config;
    // Timed and counted: custos_kms_request_duration_seconds, custos_kms_request_failures_total.
    const kms = measuredKms(await createKmsProvider(c, rt.logger), rt.metrics.registry);
    rt.onShutdown('kms', async () => {
      await kms.close?.();
    });

    const opts = { tls: rt.tls, deadlineMs: c.GRPC_DEADLINE_MS };
    const policy = createGrpcClient(PolicyServiceClient, c.POLICY_ADDR, { ...opts, peer: 'policy' });
    const billing = createGrpcClient(BillingServiceClient, c.BILLING_ADDR, { ...opts, peer: 'billing' });
    // Identity's step-up check (org key rotation); the token keys have their own client.
    const account = createGrpcClient(AccountServiceClient, c.IDENTITY_ADDR, { ...opts, peer: 'identity' });
    rt.onShutdown('peers', async () => {
      policy.close();
      billing.close();
      account.close();
    });

    const keys = await connectServiceIdentityKeys(rt);
    const ring = new OrgKeyRing(
      db,
      kms,
      {
        rotationMs: c.ORG_KEY_ROTATION_DAYS * DAY_MS,
        cacheTtlMs: c.DATA_KEY_CACHE_TTL_SECONDS * 1000,
        cacheSize: c.DATA_KEY_CACHE_SIZE,
      },
      rt.logger,
    );
    // Its own Redis connection for the orgs' decision generations (the keys' one reads revocations).
    // Auto-pipelined: the GETs of concurrent operations leave in one write (each still asks).
    const redis = new Redis(c.REDIS_URL, verifierRedisOptions(c.REDIS_URL, c));
    redis.on('error', (err) => rt.logger.warn({ err: describeError(err) }, 'redis error'));
    rt.onShutdown('redis-decisions', async () => {
      redis.disconnect();
    });
    const decisions = new DecisionCache(redis, {
      ttlMs: c.POLICY_DECISION_CACHE_TTL_MS,
      size: c.POLICY_DECISION_CACHE_SIZE,
    });
    const access = new AccessService(new PolicyClient(policy), decisions);
    const limits = new BillingClient(billing);
    const vaultStore = new VaultStore(db, pool);
    // Records of concurrent reads share a commit; each commit nudges the relay (it folds nudges
    // into at most one cycle per few milliseconds).
    const commits = new OutboxGroupCommit({ pool, schema: SCHEMA, onCommitted: () => events.relay.nudge() });
    const audit = new VaultCryptoAudit(db, rt.logger, commits);
    const vaults = new VaultService(vaultStore, access, limits, ring, audit, new StepUpClient(account));
    const secretStore = new SecretStore(db, pool);
    const secrets = new SecretService(
      {
        vaults: vaultStore,
        secrets: secretStore,
        access,
        limits,
        ring,
        audit,
        logger: rt.logger,
      },
      { ttlMs: c.DATA_KEY_CACHE_TTL_SECONDS * 1000, size: c.DATA_KEY_CACHE_SIZE },
    );
    const env = new EnvService(vaultStore, access, secrets);
    const shares = new ShareService({
      store: new ShareStore(db),
      vaults: vaultStore,
      access,
      secrets,
      outbox,
    });
    rt.grpc.add(
      VaultCryptoServiceService,
      vaultCryptoGrpc({ kms, keys, vaults, secrets, env, shares }),
      vaultCryptoAccess,
    );
    // Signer's sealing of agents' private keys (its certificate only).
    const agentKeys = new AgentKeyService({
      vaults: vaultStore,
      secrets: secretStore,
      ring,
      open: (row) => secrets.openVersion(row),
      audit: (r) =>
        audit.failClosed(r.action, async () => {
          await commits.audit(r);
        }),
    });
    rt.grpc.add(AgentKeyVaultServiceService, agentKeyVaultGrpc({ agentKeys }), agentKeyVaultAccess);
  },
});
