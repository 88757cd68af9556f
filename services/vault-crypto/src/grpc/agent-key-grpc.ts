import type { AgentKeyVaultServiceServer } from '@custos/proto/custos/vault_crypto/v1/agent_keys';
import type { AsyncService, RpcAccess } from '@custos/service-kit';
import type { AgentKeyService } from '../agent-keys/agent-key-service.js';

/**
 * Who may call AgentKeyVaultService: signer alone (its mesh certificate). It carries no user token:
 * signer has authorized the user before it generated the key.
 */
export const agentKeyVaultAccess: RpcAccess<AgentKeyVaultServiceServer> = { default: ['signer'] };

/** gRPC adapter of AgentKeyVaultService: decode, store or load, encode (a key goes back to signer only). */
export function agentKeyVaultGrpc(deps: {
  agentKeys: AgentKeyService;
}): AsyncService<AgentKeyVaultServiceServer> {
  return {
    async storeAgentKey(req) {
      try {
        return await deps.agentKeys.store(req);
      } finally {
        req.privateKey.fill(0);
      }
    },
    async loadAgentKey(req) {
      // The answer's key bytes cannot be zeroed here: grpc-js serializes the response after this
      // returns, and the serialized frame is its own. They live until collected (signer zeroes its copy).
      return deps.agentKeys.load(req);
    },
  };
}
