import type { ServerUnaryCall } from '@grpc/grpc-js';
import { type Principal, type TokenVerifier, bearerToken } from '@custos/auth';
import { UnauthenticatedError } from '@custos/service-kit';

/**
 * Resolves the caller of an RPC from the bearer JWT the gateway forwarded in metadata; identity
 * verifies it like every other service does (signature, claims, revocation).
 */
export function callerResolver(
  verifier: TokenVerifier,
): (call: ServerUnaryCall<unknown, unknown>) => Promise<Principal> {
  return async (call) => {
    const raw = call.metadata.get('authorization')[0];
    const token = bearerToken(typeof raw === 'string' ? raw : undefined);
    if (!token) throw new UnauthenticatedError();
    return verifier.verify(token);
  };
}
