import type { ServerUnaryCall } from '@grpc/grpc-js';
import { type Principal, type TokenVerifier, bearerToken } from '@custos/auth';
import {
  type MeshService,
  type RpcAccess,
  UnauthenticatedError,
  currentRequestContext,
} from '@custos/service-kit';

/** Who may call identity's user-facing services (accounts, orgs, MFA, router keys, federation): the gateway. */
export const gatewayOnly: RpcAccess<unknown> = { default: ['gateway'] };

/** Every service that verifies access tokens itself, and so reads identity's public keys (GetJwks). */
export const JWKS_READERS: readonly MeshService[] = [
  'gateway',
  'vault-crypto',
  'policy',
  'audit',
  'webhook-dispatcher',
  'billing',
  'signer',
  'approvals',
];

/**
 * Resolves the caller of an RPC from the bearer JWT the gateway forwarded (the request context
 * holds it only on the gateway's calls); identity verifies it like every other service does
 * (signature, claims, revocation).
 */
export function callerResolver(
  verifier: TokenVerifier,
): (call: ServerUnaryCall<unknown, unknown>) => Promise<Principal> {
  return async () => {
    const token = bearerToken(currentRequestContext()?.authorization);
    if (!token) throw new UnauthenticatedError();
    return verifier.verify(token);
  };
}
