import { type IdentityKeys, type Principal, currentCaller } from '@custos/auth';
import type { Chain, SigningKey } from '@custos/proto/custos/signer/v1/messages';
import type { SignerServiceServer } from '@custos/proto/custos/signer/v1/service';
import { type AsyncService, type RpcAccess, currentRequestContext } from '@custos/service-kit';
import { endpointsFor, keyNameOf } from '../chains/chain-fns.js';
import type { ChainService } from '../chains/chain-service.js';
import type { ChainRecord } from '../chains/chain-types.js';
import type { KeyService } from '../keys/key-service.js';
import type { SigningKeyRecord } from '../keys/key-types.js';

/** A chain as the wire carries it to the caller: its endpoints to platform admins only. */
export function chainMessage(c: ChainRecord, p: Principal): Chain {
  return {
    ...endpointsFor(c, p.kind === 'user' && p.platformAdmin),
    id: c.id,
    name: c.name,
    displayName: c.displayName,
    chainId: c.chainId.toString(),
    family: c.family,
    explorerUrl: c.explorerUrl,
    nativeCurrency: c.nativeCurrency,
    nativeDecimals: c.nativeDecimals,
    isTestnet: c.isTestnet,
    isEnabled: c.isEnabled,
    createdAt: c.createdAt.toISOString(),
    updatedAt: c.updatedAt.toISOString(),
  };
}

/** A key version's public view; the record holds no private half to leak. */
export function signingKeyMessage(k: SigningKeyRecord): SigningKey {
  return {
    id: k.id,
    agentId: k.agentId,
    chain: keyNameOf(k.family),
    curve: k.curve,
    publicKey: k.publicKey,
    address: k.address,
    keyVersion: k.keyVersion,
    isActive: k.isActive,
    custody: k.custody,
    createdAt: k.createdAt.toISOString(),
    rotatedAt: k.rotatedAt?.toISOString() ?? '',
  };
}

/** Who may call SignerService: the gateway, for users' and agents' requests. */
export const signerAccess: RpcAccess<SignerServiceServer> = { default: ['gateway'] };

/** gRPC adapter of SignerService: verify the caller, decode, call the rules, encode. */
export function signerGrpc(deps: {
  keys: IdentityKeys;
  chains: ChainService;
  signingKeys: KeyService;
}): AsyncService<SignerServiceServer> {
  const caller = () => currentCaller(deps.keys);
  return {
    async listChains(req) {
      const p = await caller();
      return { chains: (await deps.chains.list(p, req.includeDisabled)).map((c) => chainMessage(c, p)) };
    },
    async getChain(req) {
      const p = await caller();
      return { chain: chainMessage(await deps.chains.get(p, req.identifier), p) };
    },
    async createChain(req) {
      const p = await caller();
      return { chain: chainMessage(await deps.chains.create(p, req), p) };
    },
    async updateChain(req) {
      const { identifier, ...change } = req;
      const p = await caller();
      return { chain: chainMessage(await deps.chains.update(p, identifier, change), p) };
    },
    async createSigningKey(req) {
      // Where the request comes from, for custody geofencing: the client IP the gateway forwarded
      // and the region it read from its trusted ingress header.
      const origin = { clientIp: currentRequestContext()?.clientIp, headerRegion: req.clientRegion };
      const k = await deps.signingKeys.create(await caller(), req.agentId, req.chain, req.custody, origin);
      return { key: signingKeyMessage(k) };
    },
    async listSigningKeys(req) {
      return { keys: (await deps.signingKeys.list(await caller(), req.agentId)).map(signingKeyMessage) };
    },
    async rotateSigningKey(req) {
      const r = await deps.signingKeys.rotate(await caller(), req.agentId, req.chain);
      return { key: signingKeyMessage(r.key), previous: signingKeyMessage(r.previous) };
    },
  };
}
