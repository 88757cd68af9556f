import { randomUUID } from 'node:crypto';
import { type OrgAdmin, type Principal, requireHumanAdmin } from '@custos/auth';
import { auditOf, writeEvent } from '@custos/events';
import { ConflictError, InvalidArgumentError, type Logger, NotFoundError } from '@custos/service-kit';
import { failClosed, writeSignerAudit } from '../audit/signer-audit.js';
import { keyNameOf } from '../chains/chain-fns.js';
import type { ChainService } from '../chains/chain-service.js';
import type { ChainRecord } from '../chains/chain-types.js';
import { outbox } from '../db/schema.js';
import type { IdentityClient } from '../peers/identity-client.js';
import type { VaultCryptoClient } from '../peers/vault-crypto-client.js';
import type { CustodyGeofence, RequestOrigin } from '../screening/custody-geofence.js';
import { type ChainAdapter, type ChainAdapters, adapterFor } from './chain-adapter.js';
import { agentIdOf, creatableCustody, keyDetails, onNetwork, sortKeys } from './key-fns.js';
import type { KeyStore } from './key-store.js';
import type { SigningKeyRecord } from './key-types.js';

function manager(p: Principal, what: string): OrgAdmin {
  requireHumanAdmin(p, what);
  return p;
}

/**
 * Agents' signing keys. A key is generated here, its private half sealed by vault-crypto in the
 * org's `__agent-keys` vault before the public half is recorded; the private half is never
 * returned, logged, audited or put in an event. One EVM key serves every EVM chain. Making and
 * rotating a key is for owners and admins of the agent's org (as every other change of an agent);
 * before any of it signer asks identity itself that the agent is in the org of the token it
 * verified (the gateway is not trusted for that), so no org can make or read keys of another's agent.
 */
export class KeyService {
  constructor(
    private readonly deps: {
      store: KeyStore;
      chains: Pick<ChainService, 'resolve'>;
      adapters: ChainAdapters;
      vault: Pick<VaultCryptoClient, 'storeKey'>;
      identity: Pick<IdentityClient, 'requireAgentInOrg'>;
      logger: Logger;
      /** Custody geofencing (issue 20); absent: no region is fenced. */
      geofence?: Pick<CustodyGeofence, 'check'>;
    },
  ) {}

  private adapterOf(chain: ChainRecord): ChainAdapter {
    return adapterFor(this.deps.adapters, chain);
  }

  /**
   * Generates a key and seals its private half; returns the public view and the stored secret's id.
   * For a client_tss key the generated key is the server's share, sealed alike: the key's public
   * key and address are the two shares' joint ones, unknown until the threshold protocol exists, so
   * both stay empty (the API shows null) and the key can neither sign here nor receive value.
   */
  private async generateAndStore(
    p: OrgAdmin,
    agentId: string,
    adapter: ChainAdapter,
    keyVersion: number,
    custody: 'server' | 'client_tss' = 'server',
  ): Promise<Omit<SigningKeyRecord, 'createdAt' | 'rotatedAt' | 'isActive'>> {
    const id = randomUUID();
    const key = adapter.generate();
    try {
      const vaultSecretId = await this.deps.vault.storeKey({
        orgId: p.orgId,
        agentId,
        chain: keyNameOf(adapter.family),
        keyId: id,
        keyVersion,
        curve: adapter.curve,
        privateKey: key.privateKey,
      });
      return {
        id,
        orgId: p.orgId,
        agentId,
        family: adapter.family,
        curve: adapter.curve,
        publicKey: custody === 'server' ? key.publicKey : '',
        address: custody === 'server' ? key.address : '',
        keyVersion,
        custody,
        vaultSecretId,
        createdBy: p.userId,
      };
    } finally {
      key.privateKey.fill(0);
    }
  }

  /**
   * Provisions the agent's key for the chain's family (owners and admins of the org): a server key,
   * or a client_tss key of which signer holds one share. 400 naming `chain` for an unknown,
   * disabled or not yet supported chain and `custody` for passkey_owner or an unknown label; 409
   * when the agent has an active key for the family (decided by the database under races); 403
   * `custody_geofenced` (audited) for a server key asked from a geofenced region. `origin` is where
   * the request comes from (default: the client IP the gateway forwarded).
   */
  async create(
    p: Principal,
    rawAgentId: string,
    chainRef: string,
    custody: string,
    origin?: RequestOrigin,
  ): Promise<SigningKeyRecord> {
    const user = manager(p, "create an agent's signing keys");
    const agentId = agentIdOf(rawAgentId);
    const label = creatableCustody(custody);
    const chain = await this.deps.chains.resolve(chainRef, 'chain');
    await this.deps.identity.requireAgentInOrg(user.orgId, agentId);
    await this.deps.geofence?.check(user, agentId, label, origin);
    const adapter = this.adapterOf(chain);
    const conflict = () =>
      new ConflictError(
        `the agent already has an active ${keyNameOf(chain.family)} signing key; rotate it instead`,
        'chain',
      );
    if (await this.deps.store.active(p.orgId, agentId, chain.family)) throw conflict();
    const version = await this.deps.store.nextVersion(agentId, chain.family);
    const row = await this.generateAndStore(user, agentId, adapter, version, label);
    const r = await failClosed(this.deps.logger, 'signing_key.created', () =>
      this.deps.store.insert(row, (tx, k) =>
        writeSignerAudit(
          tx,
          auditOf(user, 'signing_key.created', { type: 'signing_key', id: k.id }, keyDetails(k)),
        ),
      ),
    );
    // A racing create won: the sealed key of this one stays unused in the vault (never listed).
    if (r === 'conflict') throw conflict();
    return onNetwork(adapter, r, chain);
  }

  /** Every version of the agent's keys (humans of the org, or the agent itself), active first. */
  async list(p: Principal, rawAgentId: string): Promise<SigningKeyRecord[]> {
    const agentId = agentIdOf(rawAgentId);
    if (p.kind === 'agent' && p.agentId !== agentId) throw new NotFoundError('agent', rawAgentId);
    await this.deps.identity.requireAgentInOrg(p.orgId, agentId);
    return sortKeys(await this.deps.store.list(p.orgId, agentId));
  }

  /**
   * Replaces the agent's active key for the chain's family with a new version (owners and admins).
   * The old version stays stored and listed (inactive, `rotated_at`) for audit; `signing_key.rotated`
   * is emitted with the change. A disabled chain's key can still be rotated.
   */
  async rotate(
    p: Principal,
    rawAgentId: string,
    chainRef: string,
  ): Promise<{ key: SigningKeyRecord; previous: SigningKeyRecord }> {
    const user = manager(p, "rotate an agent's signing keys");
    const agentId = agentIdOf(rawAgentId);
    const chain = await this.deps.chains.resolve(chainRef, 'chain', true);
    await this.deps.identity.requireAgentInOrg(user.orgId, agentId);
    const adapter = this.adapterOf(chain);
    const previous = await this.deps.store.active(p.orgId, agentId, chain.family);
    if (!previous) throw new NotFoundError('signing key', keyNameOf(chain.family));
    if (previous.custody !== 'server') {
      throw new InvalidArgumentError(
        'chain',
        `the ${previous.custody} key is not rotated on the server path`,
      );
    }
    // A rotation makes a new server key: geofenced as a creation is (issue 20).
    await this.deps.geofence?.check(user, agentId, 'server');
    const row = await this.generateAndStore(user, agentId, adapter, previous.keyVersion + 1);
    const r = await failClosed(this.deps.logger, 'signing_key.rotated', () =>
      this.deps.store.rotate(previous, row, async (tx, k, old) => {
        const details = {
          ...keyDetails(k),
          previous_key_id: old.id,
          previous_key_version: old.keyVersion,
          previous_address: old.address,
        };
        await writeSignerAudit(
          tx,
          auditOf(user, 'signing_key.rotated', { type: 'signing_key', id: k.id }, details),
        );
        await writeEvent(tx, outbox, {
          name: 'signing_key.rotated',
          orgId: k.orgId,
          data: { key_id: k.id, ...details, rotated_at: new Date().toISOString() },
        });
      }),
    );
    if (r === 'conflict')
      throw new ConflictError('the key was rotated meanwhile; list the keys and try again', 'chain');
    return { key: onNetwork(adapter, r.key, chain), previous: onNetwork(adapter, r.previous, chain) };
  }
}
