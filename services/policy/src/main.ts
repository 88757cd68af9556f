import path from 'node:path';
import { connectIdentityKeys } from '@custos/auth';
import { runDataService } from '@custos/events';
import { OrgServiceClient } from '@custos/proto/custos/identity/v1/orgs';
import { IdentityServiceClient } from '@custos/proto/custos/identity/v1/service';
import { PolicyServiceService } from '@custos/proto/custos/policy/v1/service';
import { VaultCryptoServiceClient } from '@custos/proto/custos/vault_crypto/v1/service';
import { createGrpcClient } from '@custos/service-kit';
import { configShape } from './config.js';
import { SCHEMA } from './db/schema.js';
import { GrantPeers } from './grants/grant-peers.js';
import { GrantService } from './grants/grant-service.js';
import { GrantStore } from './grants/grant-store.js';
import { policyGrpc } from './grpc/policy-grpc.js';
import { IpRuleService } from './ip-rules/ip-rule-service.js';
import { IpRuleStore } from './ip-rules/ip-rule-store.js';

// Composition root of policy: peers, grants and decisions, IP rules, then the gRPC adapter.
runDataService({
  name: 'policy',
  schema: SCHEMA,
  migrationsFolder: path.join(__dirname, '..', 'migrations'),
  configShape,
  async start(rt, { db }) {
    const c = rt.config;
    const opts = { deadlineMs: c.GRPC_DEADLINE_MS };
    const vaultCrypto = createGrpcClient(VaultCryptoServiceClient, c.VAULT_CRYPTO_ADDR, opts);
    const identity = createGrpcClient(IdentityServiceClient, c.IDENTITY_ADDR, opts);
    const orgs = createGrpcClient(OrgServiceClient, c.IDENTITY_ADDR, opts);
    rt.onShutdown('peers', async () => {
      vaultCrypto.close();
      identity.close();
      orgs.close();
    });
    const keys = await connectIdentityKeys(
      { redisUrl: c.REDIS_URL, identityAddr: c.IDENTITY_ADDR, deadlineMs: c.GRPC_DEADLINE_MS },
      rt.logger,
      rt.onShutdown,
    );
    const grants = new GrantService(new GrantStore(db), new GrantPeers(vaultCrypto, identity, orgs));
    const ipRules = new IpRuleService(new IpRuleStore(db));
    rt.grpc.add(PolicyServiceService, policyGrpc({ keys, grants, ipRules }));
  },
});
