import { type IdentityKeys, currentCaller } from '@custos/auth';
import type {
  GetClientShareResponse,
  ClientShareWrap,
  KeyCustodyServiceServer,
} from '@custos/proto/custos/signer/v1/custody';
import type { AsyncService, RpcAccess } from '@custos/service-kit';
import { signingKeyMessage } from '../grpc/signer-grpc.js';
import type { Wrap, WrapType } from './custody-fns.js';
import type { ClientShareView, CustodyService } from './custody-service.js';

/** A wrap from the wire (the service checks its shape). */
function wrapOf(w: ClientShareWrap | undefined): Wrap {
  return {
    type: (w?.type ?? '') as WrapType,
    ciphertext: Buffer.from(w?.ciphertext ?? []),
    algorithm: w?.algorithm ?? '',
    nonce: Buffer.from(w?.nonce ?? []),
    credentialId: w?.credentialId ?? '',
    salt: Buffer.from(w?.salt ?? []),
    kdf: w?.kdf ?? '',
    kdfParams: w?.kdfParams ?? {},
  };
}

function shareMessage(v: ClientShareView): GetClientShareResponse {
  return {
    keyId: v.key.id,
    agentId: v.key.agentId,
    wrapsComplete: v.wrapsComplete,
    wraps: v.wraps.map((w) => ({
      type: w.type,
      ciphertext: w.ciphertext,
      algorithm: w.algorithm,
      nonce: w.nonce,
      credentialId: w.credentialId,
      salt: w.salt,
      kdf: w.kdf,
      kdfParams: w.kdfParams,
      createdAt: w.createdAt.toISOString(),
      updatedAt: w.updatedAt.toISOString(),
    })),
  };
}

/** Who may call KeyCustodyService: the gateway, for users' requests. */
export const custodyAccess: RpcAccess<KeyCustodyServiceServer> = { default: ['gateway'] };

/** gRPC adapter of KeyCustodyService: verify the caller, decode, call the rules, encode. */
export function custodyGrpc(deps: {
  keys: IdentityKeys;
  custody: CustodyService;
}): AsyncService<KeyCustodyServiceServer> {
  const caller = () => currentCaller(deps.keys);
  return {
    async exportSigningKey(req) {
      const r = await deps.custody.export(await caller(), req.agentId, req.chain, req.credential);
      return { key: signingKeyMessage(r.key), privateKey: r.privateKey };
    },
    async importSigningKey(req) {
      const r = await deps.custody.import(
        await caller(),
        req.agentId,
        req.chain,
        req.credential,
        req.privateKey,
      );
      return {
        key: signingKeyMessage(r.key),
        ...(r.previous ? { previous: signingKeyMessage(r.previous) } : {}),
      };
    },
    async putClientShare(req) {
      return shareMessage(
        await deps.custody.putClientShare(await caller(), req.keyId, req.wraps.map(wrapOf)),
      );
    },
    async getClientShare(req) {
      return shareMessage(await deps.custody.getClientShare(await caller(), req.keyId));
    },
    async rewrapClientShare(req) {
      return shareMessage(await deps.custody.rewrapClientShare(await caller(), req.keyId, wrapOf(req.wrap)));
    },
  };
}
