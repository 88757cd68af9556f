import { tokenTrustConfigShape } from '@custos/auth';
import { natsConfigShape } from '@custos/events';
import { baseConfigShape, databaseConfigShape, env, redisConnectionConfigShape } from '@custos/service-kit';

/** Every environment variable the signer service reads (see docs/configuration.md). */
export const configShape = {
  ...baseConfigShape({ grpcPort: 50054, metricsPort: 9464 }),
  ...databaseConfigShape,
  ...natsConfigShape,
  ...tokenTrustConfigShape,
  REDIS_URL: env.url('Redis URL; token revocations are read there.', ['redis', 'rediss']),
  ...redisConnectionConfigShape,
  IDENTITY_ADDR: env
    .address(
      "host:port of the identity service (token signing keys; whether an agent is in the caller's org).",
    )
    .default('127.0.0.1:50051'),
  VAULT_CRYPTO_ADDR: env
    .address("host:port of the vault-crypto service (it seals agents' private keys).")
    .default('127.0.0.1:50052'),
  POLICY_ADDR: env
    .address("host:port of the policy service (the consensus triggers on agents' vault policies).")
    .default('127.0.0.1:50053'),
  APPROVALS_ADDR: env
    .address(
      'host:port of the approvals service (transactions and sign intents an approval rule sends to humans).',
    )
    .default('127.0.0.1:50055'),
  GRPC_DEADLINE_MS: env
    .int('Deadline of a call to a peer service, in milliseconds.', 100, 60000)
    .default(5000),
  CHAIN_RPC_URLS: env
    .string(
      'Node endpoints of the seeded chains for this install, as comma-separated `name=url` pairs ' +
        "(`ethereum=https://…,bitcoin=https://blockstream.info/api`; each family's protocol in " +
        'docs/chains.md); applied to the registry at every start (an admin can ' +
        'change them later with PATCH /v1/admin/chains/{id}, until the next start). Empty: the seeds ' +
        'keep the URL they have (none at first).',
    )
    .optional(),
  LOCAL_EVM_RPC_URL: env
    .string(
      'Dev and tests only: the JSON-RPC URL of a local EVM node (anvil). When set, signer registers ' +
        'it at start as the enabled testnet chain `anvil` (chain_id 31337). Leave unset in production.',
    )
    .optional(),
  SIGNING_KEY_CACHE_TTL_SECONDS: env
    .int(
      'How long signer keeps an opened private key in memory for the next signatures (0: open it ' +
        'from vault-crypto for every signature).',
      0,
      3600,
    )
    .default(300),
  SIGNING_KEY_CACHE_SIZE: env
    .int('How many opened private keys signer keeps in memory at most (0: none).', 0, 100000)
    .default(5000),
  EVM_RPC_TIMEOUT_MS: env
    .int(
      'Timeout of one call to a chain node (EVM JSON-RPC, and the Esplora, Solana, rippled, TRON and ' +
        'Blockfrost APIs of the other families), in milliseconds. A submission makes ' +
        "several; it takes a nonce and signs only with 2 × this + 1 s left before the gateway's 60 s " +
        'deadline and broadcasts only with 1 × this + 1 s left (else 503, nothing sent); a broadcast ' +
        'still unanswered 1 s before the deadline is answered `signed`. Keep it well below 20 s.',
      100,
      120000,
    )
    .default(10000),
  TX_WATCH_INTERVAL_MS: env
    .int(
      'How often the receipt watcher looks for receipts of broadcast transactions, in milliseconds ' +
        '(also the wait before a not-yet-mined transaction is looked at again).',
      50,
      600000,
    )
    .default(2000),
  TX_WATCH_BATCH: env
    .int('At most how many broadcast transactions one watcher round checks.', 1, 1000)
    .default(100),
  TX_RECOVER_AFTER_SECONDS: env
    .int(
      'A transaction still pending or signed this long after it was made was left by a request ' +
        'that never finished (signer stopped): the watcher gives its nonce back (pending) or sends ' +
        'its signed bytes again (signed); an Idempotency-Key claim with no transaction this old is ' +
        "taken over. At least 120 s, above the gateway's 60 s deadline, so a live request is never " +
        'taken over.',
      120,
      86400,
    )
    .default(300),
  SANCTIONS_LIST_URL: env
    .url(
      'Where the sanctions list of address screening is fetched (docs/screening.md: the JSON format, or ' +
        "OFAC's SDN CSV). Each replica fetches it at start and every SANCTIONS_REFRESH_SECONDS. Set this " +
        'or SANCTIONS_LIST_FILE; with neither, an agent whose address_screening_policy.mode is `deny` or ' +
        '`approve` has its transfers paused (503).',
      ['https', 'http'],
    )
    .optional(),
  SANCTIONS_LIST_FILE: env
    .string(
      'A local file holding the sanctions list (instead of SANCTIONS_LIST_URL), read at start and every ' +
        "SANCTIONS_REFRESH_SECONDS; without a `published_at` in the document, the file's modification " +
        'time is its age.',
    )
    .optional(),
  SANCTIONS_LIST_FORMAT: env
    .oneOf(
      'Format of the sanctions list: `json` (docs/screening.md), `ofac_sdn_csv` (OFAC sdn.csv), or ' +
        '`auto` (JSON when the document starts with `{`).',
      ['auto', 'json', 'ofac_sdn_csv'] as ['auto', 'json', 'ofac_sdn_csv'],
    )
    .default('auto'),
  SANCTIONS_LIST_NAME: env
    .string(
      'The name a sanctions hit names (403 `list`, audit `sanctions.blocked`) when the document names ' +
        'none (the JSON format has its own `name`).',
    )
    .default('sanctions'),
  SANCTIONS_REFRESH_SECONDS: env
    .int(
      'How often each replica loads the sanctions list again, in seconds; a failed load keeps the ' +
        'previous list, which pauses screened transfers (503) once it is older than seven days.',
      10,
      86400,
    )
    .default(3600),
  PRICE_TABLE_USD: env
    .string(
      'USD prices of native currencies for the money caps (usd_daily_limit_usd), e.g. `ETH=3000.25,BTC=65000,USDC=1`; ' +
        'a price in CHAINLINK_FEEDS is used first. A currency with neither cannot be valued: a transaction under a USD cap ' +
        'that spends it is 503 `price_unavailable` (docs/guardrails.md).',
    )
    .optional(),
  CHAINLINK_FEEDS: env
    .string(
      'Chainlink AggregatorV3 USD feeds, per currency: `ETH=ethereum:0x5f4e…,BTC=ethereum:0xF403…` (the EVM chain, as ' +
        'registered, whose contract gives the price; read with eth_call on that chain).',
    )
    .optional(),
  PRICE_MAX_AGE_SECONDS: env
    .int(
      'The oldest a Chainlink round may be and still value a transaction under a USD cap, in seconds; older is 503.',
      60,
      7 * 86400,
    )
    .default(3600),
  USDC_CONTRACTS: env
    .string(
      'USDC token contracts per chain for usdc_daily_limit_usd, e.g. `ethereum=0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48`; ' +
        'a `transfer`/`transferFrom` call to one of them counts its amount against the cap.',
    )
    .optional(),
  CUSTODY_GEOFENCED_REGIONS: env.list(
    'ISO 3166-1 alpha-2 country codes (comma-separated, e.g. `KP,IR`) from which no `server`-custody ' +
      'signing key is created (403 `custody_geofenced`, audit `custody.geofenced`). Empty: none.',
  ),
  CUSTODY_REGION_SOURCE: env
    .oneOf(
      "Where a key creation's region comes from: `geoip` (CUSTODY_GEOIP_DATABASE looked up with the " +
        "client IP the gateway resolved) or `header` (the gateway's CUSTODY_REGION_HEADER, e.g. " +
        '`cf-ipcountry`, set by a trusted ingress).',
      ['geoip', 'header'] as ['geoip', 'header'],
    )
    .default('geoip'),
  CUSTODY_GEOIP_DATABASE: env
    .string(
      'Path of a MaxMind DB (GeoIP2/GeoLite2 Country or City .mmdb) for custody geofencing in `geoip` ' +
        'mode; reloaded when the file changes. Required when CUSTODY_GEOFENCED_REGIONS is set in that mode.',
    )
    .optional(),
  CUSTODY_GEOFENCE_UNKNOWN: env
    .oneOf(
      'What a `server` key creation whose region is unknown (private address, not in the database, no ' +
        'header) gets while regions are geofenced: `allow` or `deny`.',
      ['allow', 'deny'] as ['allow', 'deny'],
    )
    .default('allow'),
};
