import { StepUpClient, connectServiceIdentityKeys } from '@custos/auth';
import { runDataService, startServiceEventMetrics } from '@custos/events';
import { SignerServiceService } from '@custos/proto/custos/signer/v1/service';
import { IdentityServiceClient } from '@custos/proto/custos/identity/v1/service';
import { AgentKeyVaultServiceClient } from '@custos/proto/custos/vault_crypto/v1/agent_keys';
import { createGrpcClient } from '@custos/service-kit';
import { ChainService } from './chains/chain-service.js';
import { ChainStore } from './chains/chain-store.js';
import { configShape } from './config.js';
import { SCHEMA } from './db/schema.js';
import { signerAccess, signerGrpc } from './grpc/signer-grpc.js';
import { CHAIN_ADAPTERS } from './adapters/registry.js';
import { KeyService } from './keys/key-service.js';
import { KeyStore } from './keys/key-store.js';
import { IdentityClient } from './peers/identity-client.js';
import { VaultCryptoClient } from './peers/vault-crypto-client.js';
import { AccountServiceClient } from '@custos/proto/custos/identity/v1/account';
import { KeyCustodyServiceService } from '@custos/proto/custos/signer/v1/custody';
import { custodyAccess, custodyGrpc } from './custody/custody-grpc.js';
import { CustodyService } from './custody/custody-service.js';
import { CustodyStore } from './custody/custody-store.js';
import { IntentContext } from './intents/intent-context.js';
import { KeyLoader } from './keys/key-loader.js';
import { EvmRpcPool } from './evm/index.js';
import { TransactionService } from './transactions/tx-service.js';
import { Guardrails } from './guardrails/guardrails.js';
import { GuardrailLedger } from './guardrails/guardrail-ledger.js';
import { parseFeeds, parsePriceTable, parseUsdcContracts } from './prices/price-fns.js';
import { ChainlinkPrices, PriceOracle, StaticPrices } from './prices/price-source.js';
import { UsdCaps } from './prices/usd-caps.js';
import { TxStore } from './transactions/tx-store.js';
import { TxWatcher } from './transactions/tx-watcher.js';
import { transactionAccess, transactionGrpc } from './transactions/tx-grpc.js';
import { TransactionServiceService } from '@custos/proto/custos/signer/v1/transactions';
import { SignServiceService } from '@custos/proto/custos/signer/v1/sign';
import { signAccess, signGrpc } from './sign/sign-grpc.js';
import { SignService } from './sign/sign-service.js';
import { SignStore } from './sign/sign-store.js';
import { ApprovalsServiceClient } from '@custos/proto/custos/approvals/v1/service';
import { ApprovalsClient } from './peers/approvals-client.js';
import { PolicyServiceClient } from '@custos/proto/custos/policy/v1/service';
import { PolicyClient } from './peers/policy-client.js';
import { GuardrailServiceService } from '@custos/proto/custos/signer/v1/guardrails';
import { GuardrailReplay } from './replay/guardrail-replay.js';
import { replayAccess, replayGrpc } from './replay/replay-grpc.js';
import { SpendTodayReader } from './replay/spend-today.js';
import { ApprovalGate } from './approvals/approval-gate.js';
import { PreviewRpcPool } from './preview/index.js';
import { CustodyGeofence, parseRegions } from './screening/custody-geofence.js';
import { SanctionsScreen } from './screening/sanctions-screen.js';

// Composition root of signer: the chains registry and agents' signing keys (transactions and sign
// intents come with their issue, on the same ChainAdapter).
runDataService({
  name: 'signer',
  schema: SCHEMA,
  configShape,
  async start(rt, { db, pool, events }) {
    // Outbox backlog and consumer lag (custos_outbox_*, custos_nats_consumer_*) on /metrics.
    startServiceEventMetrics(rt, { pool, schema: SCHEMA, events });
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
    // Approvals (issue 19): signer asks for the approvals its agents' rules need, and uses them once.
    const approvals = createGrpcClient(ApprovalsServiceClient, c.APPROVALS_ADDR, {
      tls: rt.tls,
      deadlineMs: c.GRPC_DEADLINE_MS,
      peer: 'approvals',
    });
    // Policy (issue 19): the consensus triggers of agents' vault policies, asked before signing.
    const policy = createGrpcClient(PolicyServiceClient, c.POLICY_ADDR, {
      tls: rt.tls,
      deadlineMs: c.GRPC_DEADLINE_MS,
      peer: 'policy',
    });
    rt.onShutdown('peers', async () => {
      policy.close();
      vaultCrypto.close();
      identity.close();
      approvals.close();
    });
    const chains = new ChainService(new ChainStore(db), rt.logger);
    await chains.bootstrap({ rpcUrls: c.CHAIN_RPC_URLS ?? '', localRpcUrl: c.LOCAL_EVM_RPC_URL ?? '' });
    const keyStore = new KeyStore(db);
    const vault = new VaultCryptoClient(vaultCrypto, rt.logger);
    const identityClient = new IdentityClient(identity);
    // Custody geofencing (issue 20): no server key from a geofenced region (docs/screening.md).
    const geofence = new CustodyGeofence({
      regions: parseRegions(c.CUSTODY_GEOFENCED_REGIONS),
      source: c.CUSTODY_REGION_SOURCE,
      geoipDatabase: c.CUSTODY_GEOIP_DATABASE,
      unknown: c.CUSTODY_GEOFENCE_UNKNOWN,
      db,
      logger: rt.logger,
    });
    await geofence.start();
    rt.onShutdown('custody geofence', async () => geofence.stop());
    // Sanctions screening (issue 20): each replica loads the list and refreshes it on a timer.
    const sanctions = new SanctionsScreen({
      source:
        c.SANCTIONS_LIST_URL || c.SANCTIONS_LIST_FILE
          ? {
              url: c.SANCTIONS_LIST_URL,
              file: c.SANCTIONS_LIST_URL ? undefined : c.SANCTIONS_LIST_FILE,
              format: c.SANCTIONS_LIST_FORMAT,
              name: c.SANCTIONS_LIST_NAME,
              timeoutMs: 30_000,
            }
          : undefined,
      db,
      logger: rt.logger,
    });
    await sanctions.start(c.SANCTIONS_REFRESH_SECONDS * 1000);
    rt.onShutdown('sanctions list refresh', async () => sanctions.stop());
    const signingKeys = new KeyService({
      store: keyStore,
      chains,
      adapters: CHAIN_ADAPTERS,
      vault,
      identity: identityClient,
      logger: rt.logger,
      geofence,
    });
    rt.grpc.add(SignerServiceService, signerGrpc({ keys, chains, signingKeys }), signerAccess);
    // Guardrails (issue 20): a draft replayed against past transactions; agents' spend of the day.
    rt.grpc.add(
      GuardrailServiceService,
      replayGrpc({
        keys,
        replay: new GuardrailReplay({ db, chains, identity: identityClient }),
        spend: new SpendTodayReader({ db, chains }),
      }),
      replayAccess,
    );
    // Key custody: export and import of agents' keys (step-up checked with identity), client shares.
    const account = createGrpcClient(AccountServiceClient, c.IDENTITY_ADDR, {
      tls: rt.tls,
      deadlineMs: c.GRPC_DEADLINE_MS,
      peer: 'identity',
    });
    rt.onShutdown('identity step-up peer', async () => account.close());
    // The opened keys of the signing path (custody drops a key an import replaced).
    const loader = new KeyLoader(vault, {
      ttlMs: c.SIGNING_KEY_CACHE_TTL_SECONDS * 1000,
      size: c.SIGNING_KEY_CACHE_SIZE,
    });
    const custody = new CustodyService({
      db,
      store: new CustodyStore(db),
      keys: new KeyStore(db),
      chains,
      adapters: CHAIN_ADAPTERS,
      vault: new VaultCryptoClient(vaultCrypto, rt.logger),
      identity: new IdentityClient(identity),
      stepUp: new StepUpClient(account),
      loader,
      logger: rt.logger,
      geofence,
    });
    rt.grpc.add(KeyCustodyServiceService, custodyGrpc({ keys, custody }), custodyAccess);
    // The Intents API: the checks every transaction and sign intent passes, and the key loader.
    const intents = new IntentContext({
      db,
      chains,
      keys: keyStore,
      adapters: CHAIN_ADAPTERS,
      identity: identityClient,
      policy: new PolicyClient(policy),
      loader,
      logger: rt.logger,
    });
    const evmRpc = new EvmRpcPool(c.EVM_RPC_TIMEOUT_MS);
    const previewRpc = new PreviewRpcPool(Math.min(c.EVM_RPC_TIMEOUT_MS, 5000));
    const gate = new ApprovalGate({
      approvals: new ApprovalsClient(approvals),
      preview: previewRpc,
      logger: rt.logger,
      previewTimeoutMs: Math.min(c.EVM_RPC_TIMEOUT_MS, 5000),
    });
    const txStore = new TxStore(db);
    // The agents' guardrails (issue 20), on every transaction and sign intent.
    // Money caps (issue 20): spend valued in USD through Chainlink feeds or the static table.
    const prices = new PriceOracle(
      [
        new ChainlinkPrices(parseFeeds(c.CHAINLINK_FEEDS), chains, evmRpc),
        new StaticPrices(parsePriceTable(c.PRICE_TABLE_USD)),
      ],
      c.PRICE_MAX_AGE_SECONDS * 1000,
    );
    const money = new UsdCaps({
      ledger: new GuardrailLedger(db),
      oracle: prices,
      usdc: parseUsdcContracts(c.USDC_CONTRACTS),
      logger: rt.logger,
    });
    const guardrails = new Guardrails({ db, logger: rt.logger, money });
    const transactions = new TransactionService({
      intents,
      store: txStore,
      rpc: evmRpc,
      identity: identityClient,
      logger: rt.logger,
      rpcTimeoutMs: c.EVM_RPC_TIMEOUT_MS,
      staleClaimMs: c.TX_RECOVER_AFTER_SECONDS * 1000,
      gate,
      guardrails,
      sanctions,
    });
    rt.grpc.add(TransactionServiceService, transactionGrpc({ keys, transactions }), transactionAccess);
    // Sign intents (POST /v1/agents/{id}/sign) on the same Intents API checks and chain access.
    const sign = new SignService({
      intents,
      store: new SignStore(db),
      rpc: evmRpc,
      logger: rt.logger,
      inputs: txStore,
      rpcTimeoutMs: c.EVM_RPC_TIMEOUT_MS,
      gate,
      guardrails,
      sanctions,
    });
    rt.grpc.add(SignServiceService, signGrpc({ keys, sign }), signAccess);
    const watcher = new TxWatcher(
      { store: txStore, chains, rpc: evmRpc, logger: rt.logger, adapters: CHAIN_ADAPTERS },
      {
        intervalMs: c.TX_WATCH_INTERVAL_MS,
        batch: c.TX_WATCH_BATCH,
        staleMs: c.TX_RECOVER_AFTER_SECONDS * 1000,
        rpcTimeoutMs: c.EVM_RPC_TIMEOUT_MS,
      },
    );
    watcher.start();
    rt.onShutdown('transaction watcher', async () => {
      await watcher.stop();
      evmRpc.close();
      previewRpc.close();
    });
  },
});
