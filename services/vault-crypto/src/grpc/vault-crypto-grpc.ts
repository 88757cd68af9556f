import type { VaultCryptoServiceServer } from '@custos/proto/custos/vault_crypto/v1/service';
import type { AsyncService } from '@custos/service-kit';
import { checkKmsHealth } from '../kms/kms-fns.js';
import type { KmsProvider } from '../kms/kms-types.js';

/** gRPC adapter of VaultCryptoService. */
export function vaultCryptoGrpc(deps: { kms: KmsProvider }): AsyncService<VaultCryptoServiceServer> {
  return {
    async getKmsHealth() {
      const h = await checkKmsHealth(deps.kms);
      return { provider: deps.kms.name, healthy: h.healthy, detail: h.detail, latencyMs: h.latencyMs };
    },
  };
}
