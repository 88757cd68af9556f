import type { TokenVerifier } from '@custos/auth';
import type {
  RouterKey as RouterKeyMessage,
  RouterKeyServiceServer,
} from '@custos/proto/custos/identity/v1/router_keys';
import type { AsyncService } from '@custos/service-kit';
import type { RouterKeyService } from '../agents/router-key-service.js';
import type { RouterKey } from '../agents/router-key-types.js';
import { callerResolver } from './caller.js';

function routerKeyMessage(k: RouterKey): RouterKeyMessage {
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

/** gRPC adapter of RouterKeyService: decode, call the rules, encode. */
export function routerKeyGrpc(deps: {
  routerKeys: RouterKeyService;
  verifier: TokenVerifier;
}): AsyncService<RouterKeyServiceServer> {
  const caller = callerResolver(deps.verifier);
  return {
    async createRouterKey(req, call) {
      const r = await deps.routerKeys.create(
        await caller(call),
        req.agentId,
        {
          maxConcurrentStreams: req.maxConcurrentStreams ?? null,
          spendCapMicroUsd: req.spendCapMicroUsd === undefined ? null : Number(req.spendCapMicroUsd),
        },
        req.credential,
      );
      return { key: routerKeyMessage(r.key), routerKey: r.routerKey };
    },
    async listRouterKeys(req, call) {
      return { keys: (await deps.routerKeys.list(await caller(call), req.agentId)).map(routerKeyMessage) };
    },
    async revokeRouterKey(req, call) {
      await deps.routerKeys.revoke(await caller(call), req.agentId, req.keyId);
      return {};
    },
  };
}
