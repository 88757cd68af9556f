import type { TokenVerifier } from '@custos/auth';
import {
  type RouterKey,
  type RouterKeyServiceServer,
  RouterKeyServiceService,
} from '@custos/proto/custos/identity/v1/router_keys';
import type { AsyncService, Database } from '@custos/service-kit';
import { callerResolver } from '../grpc/caller.js';
import type { RevocationStore } from '../tokens/revocation-store.js';
import type { TokenIssuer } from '../tokens/token-issuer.js';
import type { AgentPeers } from './agent-limits.js';
import { AgentStore } from './agent-store.js';
import { RouterKeyService, type RouterKeyView } from './router-key-service.js';
import { RouterKeyStore } from './router-key-store.js';

export { RouterKeyServiceService };

function routerKey(k: RouterKeyView): RouterKey {
  return {
    id: k.id,
    agentId: k.agentId,
    keyPrefix: k.keyPrefix,
    ...(k.maxConcurrentStreams !== null ? { maxConcurrentStreams: k.maxConcurrentStreams } : {}),
    ...(k.spendCapMicroUsd !== null ? { spendCapMicroUsd: String(k.spendCapMicroUsd) } : {}),
    createdBy: k.createdBy,
    createdAt: k.createdAt.toISOString(),
    revokedAt: k.revokedAt?.toISOString() ?? '',
  };
}

/** gRPC adapter of RouterKeyService, built from the composition root's dependencies. */
export function routerKeyGrpc(deps: {
  db: Database;
  issuer: TokenIssuer;
  revocations: RevocationStore;
  verifier: TokenVerifier;
  peers: AgentPeers;
}): AsyncService<RouterKeyServiceServer> {
  const caller = callerResolver(deps.verifier);
  const service = new RouterKeyService(
    new RouterKeyStore(deps.db),
    new AgentStore(deps.db),
    deps.issuer,
    deps.revocations,
    deps.peers,
  );

  return {
    async createRouterKey(req, call) {
      const r = await service.create(await caller(call), req.agentId, req.fields ?? {});
      return { key: routerKey(r.key), routerKey: r.routerKey };
    },
    async listRouterKeys(req, call) {
      return { keys: (await service.list(await caller(call), req.agentId)).map(routerKey) };
    },
    async revokeRouterKey(req, call) {
      await service.revoke(await caller(call), req.agentId, req.keyId);
      return {};
    },
    async exchangeRouterKey(req) {
      const t = await service.exchange(req.apiKey, req.agentId);
      return {
        tokens: { accessToken: t.token, tokenType: 'Bearer', expiresIn: t.expiresIn, refreshToken: '' },
      };
    },
  };
}
