import { createHash } from 'node:crypto';
import { type ChannelCredentials, type Client, type ClientOptions, Metadata } from '@grpc/grpc-js';
import {
  HealthCheckResponse_ServingStatus as ServingStatus,
  HealthClient,
} from '@custos/proto/grpc/health/v1/health';
import { IdentityServiceClient } from '@custos/proto/custos/identity/v1/service';
import { VaultCryptoServiceClient } from '@custos/proto/custos/vault_crypto/v1/service';
import {
  type CallerTokenSource,
  ExpiringLru,
  type MeshTls,
  callUnary,
  createGrpcClient,
} from '@custos/service-kit';
import { PEERS } from './config.js';

/** The gateway's gRPC clients: a health client per peer and the service clients the routes use. */
export interface Peers {
  health: Array<{ name: string; client: HealthClient }>;
  identity: IdentityServiceClient;
  vaultCrypto: VaultCryptoServiceClient;
  /** Opens a client for another gRPC service of a peer (closed with the others). */
  client<C extends Client>(
    ctor: new (address: string, credentials: ChannelCredentials, options?: Partial<ClientOptions>) => C,
    peer:
      | 'identity'
      | 'vault-crypto'
      | 'policy'
      | 'billing'
      | 'audit'
      | 'webhook-dispatcher'
      | 'signer'
      | 'approvals',
  ): C;
  close(): void;
}

/** How long the gateway reuses a service token it minted (at most until it expires). */
const SERVICE_TOKEN_REUSE_MS = 120_000;

/**
 * The token each peer gets for the caller: identity re-signs the user's verified token for that
 * peer (MintServiceToken, audience `<TOKEN_AUDIENCE>:<peer>`), so no peer ever holds a token the
 * public API or another peer accepts. Remembered per (user token, peer) for two minutes or until it
 * expires, at most `maxEntries`; concurrent requests for one key share one call to identity. A refusal or an
 * unreachable identity rejects with identity's error (401 or 503).
 */
export function serviceTokenSource(
  identity: IdentityServiceClient,
  opts: { maxEntries?: number; now?: () => number } = {},
): CallerTokenSource {
  const now = opts.now ?? Date.now;
  const cache = new ExpiringLru<string>(opts.maxEntries ?? 10_000);
  const inflight = new Map<string, Promise<string>>();
  const keyOf = (peer: string, userAuthorization: string) =>
    `${createHash('sha256').update(userAuthorization).digest('base64url')}:${peer}`;
  const source: CallerTokenSource = async (peer, userAuthorization) => {
    const key = keyOf(peer, userAuthorization);
    const cached = cache.get(key, now());
    if (cached) return cached;
    let pending = inflight.get(key);
    if (!pending) {
      const md = new Metadata();
      md.set('authorization', userAuthorization);
      pending = callUnary(identity, identity.mintServiceToken, { service: peer }, md)
        .then((r) => {
          // Kept two minutes at most: after an operator revokes the key that signed it (retire-key),
          // a fresh one is minted with identity's next key instead of failing until the user's
          // token expires.
          cache.set(key, r.accessToken, Math.min(Number(r.expiresAt) * 1000, now() + SERVICE_TOKEN_REUSE_MS));
          return r.accessToken;
        })
        .finally(() => inflight.delete(key));
      inflight.set(key, pending);
    }
    return pending;
  };
  source.cached = (peer, userAuthorization) => cache.get(keyOf(peer, userAuthorization), now());
  return source;
}

/**
 * Opens one channel per peer service from the `<NAME>_ADDR` settings, over mTLS with the gateway's
 * certificate (`tls`), each checking that the server is the peer it names. Only these clients
 * forward the caller (the request context) and the client IP: identity gets the user's JWT as it
 * is, every other peer a token identity re-signed for it alone (serviceTokenSource). Health
 * checks carry neither.
 */
export function connectPeers(
  config: Record<(typeof PEERS)[number]['variable'], string> & { GRPC_DEADLINE_MS: number },
  tls: MeshTls,
): Peers {
  const base = { tls, deadlineMs: config.GRPC_DEADLINE_MS };
  const health = PEERS.map((p) => ({
    name: p.name,
    client: createGrpcClient(HealthClient, config[p.variable], { ...base, peer: p.name }),
  }));
  const identity = createGrpcClient(IdentityServiceClient, config.IDENTITY_ADDR, {
    ...base,
    forwardCaller: true,
    peer: 'identity',
  });
  const opts = { ...base, forwardCaller: true, callerToken: serviceTokenSource(identity) };
  const vaultCrypto = createGrpcClient(VaultCryptoServiceClient, config.VAULT_CRYPTO_ADDR, {
    ...opts,
    peer: 'vault-crypto',
  });
  const extra: Client[] = [];
  const addresses = {
    identity: config.IDENTITY_ADDR,
    'vault-crypto': config.VAULT_CRYPTO_ADDR,
    policy: config.POLICY_ADDR,
    billing: config.BILLING_ADDR,
    audit: config.AUDIT_ADDR,
    'webhook-dispatcher': config.WEBHOOK_DISPATCHER_ADDR,
    signer: config.SIGNER_ADDR,
    approvals: config.APPROVALS_ADDR,
  };
  return {
    health,
    identity,
    vaultCrypto,
    client(ctor, peer) {
      // A second client of identity (its other services) gets the user's JWT like the first.
      const c = createGrpcClient(ctor, addresses[peer], {
        ...(peer === 'identity' ? { ...base, forwardCaller: true } : opts),
        peer,
      });
      extra.push(c);
      return c;
    },
    close() {
      for (const h of health) h.client.close();
      for (const c of extra) c.close();
      identity.close();
      vaultCrypto.close();
    },
  };
}

/** Serving state of one peer as GET /v1/health reports it. */
export type PeerState = 'serving' | 'not_serving' | 'unreachable';

/** One entry of a peer's grpc.health.v1 (`''` the whole server); undefined when it cannot be asked. */
export async function healthOf(
  client: HealthClient,
  service: string,
  timeoutMs: number,
): Promise<ServingStatus | undefined> {
  try {
    const res = await callUnary(client, client.check, { service }, new Metadata(), {
      deadline: Date.now() + timeoutMs,
    });
    return res.status;
  } catch {
    return undefined;
  }
}

/** Asks one peer's grpc.health.v1 for the whole server ('' service). */
export async function checkPeer(client: HealthClient, timeoutMs: number): Promise<PeerState> {
  const status = await healthOf(client, '', timeoutMs);
  if (status === undefined) return 'unreachable';
  return status === ServingStatus.SERVING ? 'serving' : 'not_serving';
}
