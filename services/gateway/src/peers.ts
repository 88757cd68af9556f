import { type ChannelCredentials, type Client, type ClientOptions, Metadata } from '@grpc/grpc-js';
import {
  HealthCheckResponse_ServingStatus as ServingStatus,
  HealthClient,
} from '@custos/proto/grpc/health/v1/health';
import { IdentityServiceClient } from '@custos/proto/custos/identity/v1/service';
import { VaultCryptoServiceClient } from '@custos/proto/custos/vault_crypto/v1/service';
import { type MeshTls, callUnary, createGrpcClient } from '@custos/service-kit';
import { PEERS } from './config.js';

/** The gateway's gRPC clients: a health client per peer and the service clients the routes use. */
export interface Peers {
  health: Array<{ name: string; client: HealthClient }>;
  identity: IdentityServiceClient;
  vaultCrypto: VaultCryptoServiceClient;
  /** Opens a client for another gRPC service of a peer (closed with the others). */
  client<C extends Client>(
    ctor: new (address: string, credentials: ChannelCredentials, options?: Partial<ClientOptions>) => C,
    peer: 'identity' | 'vault-crypto' | 'policy' | 'billing' | 'audit' | 'webhook-dispatcher',
  ): C;
  close(): void;
}

/**
 * Opens one channel per peer service from the `<NAME>_ADDR` settings, over mTLS with the gateway's
 * certificate (`tls`), each checking that the server is the peer it names. Only these clients
 * forward the user's JWT and client IP (the request context) to the service that acts for them.
 */
export function connectPeers(
  config: Record<(typeof PEERS)[number]['variable'], string> & { GRPC_DEADLINE_MS: number },
  tls: MeshTls,
): Peers {
  const opts = { tls, deadlineMs: config.GRPC_DEADLINE_MS, forwardCaller: true };
  const health = PEERS.map((p) => ({
    name: p.name,
    client: createGrpcClient(HealthClient, config[p.variable], { ...opts, peer: p.name }),
  }));
  const identity = createGrpcClient(IdentityServiceClient, config.IDENTITY_ADDR, {
    ...opts,
    peer: 'identity',
  });
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
  };
  return {
    health,
    identity,
    vaultCrypto,
    client(ctor, peer) {
      const c = createGrpcClient(ctor, addresses[peer], { ...opts, peer });
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

/** Asks one peer's grpc.health.v1 for the whole server ('' service). */
export async function checkPeer(client: HealthClient, timeoutMs: number): Promise<PeerState> {
  try {
    const res = await callUnary(client, client.check, { service: '' }, new Metadata(), {
      deadline: Date.now() + timeoutMs,
    });
    return res.status === ServingStatus.SERVING ? 'serving' : 'not_serving';
  } catch {
    return 'unreachable';
  }
}
