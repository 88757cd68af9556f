import { connectServiceIdentityKeys } from '@custos/auth';
import { runDataService } from '@custos/events';
import { SignerServiceService } from '@custos/proto/custos/signer/v1/service';
import { IdentityServiceClient } from '@custos/proto/custos/identity/v1/service';
import { AgentKeyVaultServiceClient } from '@custos/proto/custos/vault_crypto/v1/agent_keys';
import { createGrpcClient } from '@custos/service-kit';
import { ChainService } from './chains/chain-service.js';
import { ChainStore } from './chains/chain-store.js';
import { configShape } from './config.js';
import { SCHEMA } from './db/schema.js';
import { signerAccess, signerGrpc } from './grpc/signer-grpc.js';
import { evmAdapter } from './keys/evm-adapter.js';
import { KeyService } from './keys/key-service.js';
import { KeyStore } from './keys/key-store.js';
import { IdentityClient } from './peers/identity-client.js';
import { VaultCryptoClient } from './peers/vault-crypto-client.js';

// Composition root of signer: the chains registry and agents' signing keys (transactions and sign
// intents come with their issue, on the same ChainAdapter).
runDataService({
  name: 'signer',
  schema: SCHEMA,
  configShape,
  async start(rt, { db }) {
    const c = rt.config;
    const keys = await connectServiceIdentityKeys(rt);
    const vaultCrypto = createGrpcClient(AgentKeyVaultServiceClient, c.VAULT_CRYPTO_ADDR, {
      tls: rt.tls,
      deadlineMs: c.GRPC_DEADLINE_MS,
      peer: 'vault-crypto',
    });
    const identity = createGrpcClient(IdentityServiceClient, c.IDENTITY_ADDR, {
      tls: rt.tls,
      deadlineMs: c.GRPC_DEADLINE_MS,
      peer: 'identity',
    });
    rt.onShutdown('peers', async () => {
      vaultCrypto.close();
      identity.close();
    });
    const chains = new ChainService(new ChainStore(db), rt.logger);
    await chains.bootstrap({ rpcUrls: c.CHAIN_RPC_URLS ?? '', localRpcUrl: c.LOCAL_EVM_RPC_URL ?? '' });
    const signingKeys = new KeyService({
      store: new KeyStore(db),
      chains,
      adapters: { evm: evmAdapter },
      vault: new VaultCryptoClient(vaultCrypto, rt.logger),
      identity: new IdentityClient(identity),
      logger: rt.logger,
    });
    rt.grpc.add(SignerServiceService, signerGrpc({ keys, chains, signingKeys }), signerAccess);
  },
});
