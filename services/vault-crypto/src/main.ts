import path from 'node:path';
import { runDataService } from '@custos/events';
import { VaultCryptoServiceService } from '@custos/proto/custos/vault_crypto/v1/service';
import { configShape } from './config.js';
import { SCHEMA } from './db/schema.js';
import { vaultCryptoGrpc } from './grpc/vault-crypto-grpc.js';
import { LocalKms, loadLocalMasterKey } from './kms/local-kms.js';

// Composition root of vault-crypto: the KMS provider, then the gRPC adapters.
runDataService({
  name: 'vault-crypto',
  schema: SCHEMA,
  migrationsFolder: path.join(__dirname, '..', 'migrations'),
  configShape,
  async start(rt) {
    const kms = new LocalKms(loadLocalMasterKey(rt.config));
    rt.logger.warn(
      'KMS_PROVIDER=local: data keys are wrapped with a master key from configuration. Development only; use aws-kms or pkcs11 in production.',
    );
    rt.grpc.add(VaultCryptoServiceService, vaultCryptoGrpc({ kms }));
  },
});
