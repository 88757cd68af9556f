import type { CustodyGeofence } from '../screening/custody-geofence.js';
import { randomUUID } from 'node:crypto';
import { type OrgAdmin, type Principal, type StepUpClient, requireHumanAdmin } from '@custos/auth';
import { auditOf, writeEvent } from '@custos/events';
import {
  ConflictError,
  CustosError,
  type Database,
  type Logger,
  NotFoundError,
  UnavailableError,
  isUuid,
} from '@custos/service-kit';
import { failClosed, writeSignerAudit } from '../audit/signer-audit.js';
import { keyNameOf } from '../chains/chain-fns.js';
import type { ChainService } from '../chains/chain-service.js';
import type { ChainRecord } from '../chains/chain-types.js';
import { outbox } from '../db/schema.js';
import { type ChainAdapter, type ChainAdapters, adapterFor } from '../keys/chain-adapter.js';
import { agentIdOf, keyDetails, onNetwork } from '../keys/key-fns.js';
import type { KeyLoader } from '../keys/key-loader.js';
import type { KeyStore } from '../keys/key-store.js';
import type { SigningKeyRecord } from '../keys/key-types.js';
import type { IdentityClient } from '../peers/identity-client.js';
import type { VaultCryptoClient } from '../peers/vault-crypto-client.js';
import {
  EXPORT_PURPOSE,
  IMPORT_PURPOSE,
  type StoredWrap,
  type Wrap,
  checkWrap,
  checkWraps,
  importedKeyOf,
  keyIdOf,
  wrapSummary,
  wrapsComplete,
} from './custody-fns.js';
import type { CustodyStore } from './custody-store.js';

/** A client_tss key's stored wraps, as GET/PUT/rewrap answer them. */
export interface ClientShareView {
  key: SigningKeyRecord;
  wraps: StoredWrap[];
  wrapsComplete: boolean;
}

// Refusals recorded as `<action>.refused` (a 503 or 500 is an outage, not a refusal).
const REFUSALS = new Set(['invalid_argument', 'permission_denied', 'not_found', 'conflict', 'unprocessable']);

function manager(p: Principal, what: string): OrgAdmin {
  requireHumanAdmin(p, what);
  return p;
}

/**
 * Key custody (SPEC §2.8, §4.4): export and import of agents' signing keys, and the wraps of the
 * user's share of client_tss keys. Every action is for owners and admins of the org; export and
 * import need a step-up that signer has identity confirm (checked last, after every other refusal,
 * so a refused request does not spend a `rat_` token). Private keys are never logged, audited, put
 * in an event or error; wraps are ciphertext signer cannot open and never tries to.
 */
export class CustodyService {
  constructor(
    private readonly deps: {
      db: Database;
      store: CustodyStore;
      keys: Pick<KeyStore, 'active' | 'nextVersion'>;
      chains: Pick<ChainService, 'resolve'>;
      adapters: ChainAdapters;
      vault: Pick<VaultCryptoClient, 'storeKey' | 'loadKey'>;
      identity: Pick<IdentityClient, 'requireAgentInOrg'>;
      stepUp: Pick<StepUpClient, 'confirm'>;
      /** The signing path's opened keys: a key an import replaced is dropped from memory. */
      loader: Pick<KeyLoader, 'forget'>;
      logger: Logger;
      /** Custody geofencing (issue 20): an imported key is a server key made from the caller's region. */
      geofence?: Pick<CustodyGeofence, 'check'>;
    },
  ) {}

  private adapterOf(chain: ChainRecord): ChainAdapter {
    return adapterFor(this.deps.adapters, chain);
  }

  /**
   * Returns the private half of the agent's active key for the chain's family, after the step-up
   * `agent.signing_key.export`. The load (vault-crypto's `secret.agent_key_loaded`, purpose
   * `export`) and signer's `signing_key.export` record (key id, version, address; never the key)
   * happen before anything is answered; without the record nothing is answered (503).
   */
  async export(
    p: Principal,
    rawAgentId: string,
    chainRef: string,
    credential: string,
  ): Promise<{ key: SigningKeyRecord; privateKey: Buffer }> {
    return this.audited(p, 'signing_key.export', { type: 'agent', id: rawAgentId }, async () => {
      const user = manager(p, "export an agent's signing keys");
      const agentId = agentIdOf(rawAgentId);
      const chain = await this.deps.chains.resolve(chainRef, 'chain', true);
      await this.deps.identity.requireAgentInOrg(user.orgId, agentId);
      const key = await this.deps.keys.active(user.orgId, agentId, chain.family);
      if (!key) throw new NotFoundError('signing key', keyNameOf(chain.family));
      if (key.custody !== 'server') {
        throw new CustosError('conflict', {
          type: 'custody_not_exportable',
          field: 'chain',
          detail: `a ${key.custody} key cannot be exported: the server holds only its own share of it`,
        });
      }
      const adapter = this.adapterOf(chain);
      await this.deps.stepUp.confirm(user, EXPORT_PURPOSE, credential);
      const privateKey = await this.deps.vault.loadKey({
        orgId: key.orgId,
        secretId: key.vaultSecretId,
        keyId: key.id,
        purpose: 'export',
      });
      try {
        if (adapter.derive(privateKey).address !== key.address) {
          this.deps.logger.error({ key_id: key.id }, 'a stored key does not derive its listed address');
          throw new UnavailableError('the signing key could not be exported; nothing was exported');
        }
        await failClosed(this.deps.logger, 'signing_key.export', () =>
          this.deps.db.transaction((tx) =>
            writeSignerAudit(
              tx,
              auditOf(
                user,
                'signing_key.export',
                { type: 'signing_key', id: key.id },
                {
                  ...keyDetails(key),
                  key_id: key.id,
                },
              ),
            ),
          ),
        );
        return { key: onNetwork(adapter, key, chain), privateKey: Buffer.from(privateKey) };
      } finally {
        privateKey.fill(0);
      }
    });
  }

  /**
   * Stores a private key the caller brings as the agent's next key version for the chain's family
   * (server custody), after the step-up `agent.signing_key.import`. With an active key, the import
   * replaces it as a rotation does: the old version stays listed inactive and `signing_key.rotated`
   * is emitted (and recorded). A key that is another agent's active key is refused (409 naming
   * `private_key`): two agents never sign with one key. Audited `signing_key.import`.
   */
  async import(
    p: Principal,
    rawAgentId: string,
    chainRef: string,
    credential: string,
    rawKey: string,
  ): Promise<{ key: SigningKeyRecord; previous: SigningKeyRecord | undefined }> {
    return this.audited(p, 'signing_key.import', { type: 'agent', id: rawAgentId }, async () => {
      const user = manager(p, "import an agent's signing keys");
      const agentId = agentIdOf(rawAgentId);
      const chain = await this.deps.chains.resolve(chainRef, 'chain');
      const adapter = this.adapterOf(chain);
      const privateKey = importedKeyOf(chain.family, adapter, rawKey);
      try {
        const { publicKey, address } = adapter.derive(privateKey);
        await this.deps.identity.requireAgentInOrg(user.orgId, agentId);
        await this.deps.geofence?.check(user, agentId, 'server');
        const previous = await this.deps.keys.active(user.orgId, agentId, chain.family);
        if (previous && previous.custody !== 'server') {
          throw new ConflictError(
            `the agent's active key is a ${previous.custody} key; it is not replaced on the server path`,
            'chain',
          );
        }
        const taken = () =>
          new ConflictError(
            "this key is another agent's active signing key; it is not imported twice",
            'private_key',
          );
        if (await this.deps.store.addressTaken(agentId, chain.family, address)) throw taken();
        await this.deps.stepUp.confirm(user, IMPORT_PURPOSE, credential);
        const id = randomUUID();
        const keyVersion = await this.deps.keys.nextVersion(agentId, chain.family);
        const vaultSecretId = await this.deps.vault.storeKey({
          orgId: user.orgId,
          agentId,
          chain: keyNameOf(chain.family),
          keyId: id,
          keyVersion,
          curve: adapter.curve,
          privateKey,
        });
        const row = {
          id,
          orgId: user.orgId,
          agentId,
          family: chain.family,
          curve: adapter.curve,
          publicKey,
          address,
          keyVersion,
          custody: 'server' as const,
          vaultSecretId,
          createdBy: user.userId,
        };
        const r = await failClosed(this.deps.logger, 'signing_key.import', () =>
          this.deps.store.importKey(previous, row, async (tx, k, old) => {
            const details = {
              ...keyDetails(k),
              key_id: k.id,
              source: 'import',
              ...(old
                ? {
                    previous_key_id: old.id,
                    previous_key_version: old.keyVersion,
                    previous_address: old.address,
                  }
                : {}),
            };
            const resource = { type: 'signing_key', id: k.id };
            await writeSignerAudit(tx, auditOf(user, 'signing_key.import', resource, details));
            if (old) {
              await writeSignerAudit(tx, auditOf(user, 'signing_key.rotated', resource, details));
              await writeEvent(tx, outbox, {
                name: 'signing_key.rotated',
                orgId: k.orgId,
                data: { ...details, rotated_at: new Date().toISOString() },
              });
            }
          }),
        );
        // The sealed copy of a refused import stays unused in the vault (never listed), as a lost create's.
        if (r === 'address_taken') throw taken();
        if (r === 'conflict') {
          throw new ConflictError("the agent's keys changed meanwhile; list them and try again", 'chain');
        }
        // The replaced version no longer signs: its opened copy (if this replica holds one) is zeroed now.
        if (r.previous) this.deps.loader.forget(r.previous.id);
        return {
          key: onNetwork(adapter, r.key, chain),
          previous: r.previous && onNetwork(adapter, r.previous, chain),
        };
      } finally {
        privateKey.fill(0);
      }
    });
  }

  /** The client_tss key `rawKeyId` of the caller's org (404 for another org's or none; 409 for another custody). */
  private async clientTssKey(user: OrgAdmin, rawKeyId: string): Promise<SigningKeyRecord> {
    const keyId = keyIdOf(rawKeyId);
    const key = await this.deps.store.keyOfOrg(user.orgId, keyId);
    if (!key) throw new NotFoundError('signing key', keyId);
    if (key.custody !== 'client_tss') {
      throw new CustosError('conflict', {
        type: 'custody_mismatch',
        field: 'key_id',
        detail: `client shares belong to client_tss keys; this key's custody is ${key.custody}`,
      });
    }
    return key;
  }

  private async view(key: SigningKeyRecord): Promise<ClientShareView> {
    const wraps = await this.deps.store.wraps(key.id);
    return { key, wraps, wrapsComplete: wrapsComplete(wraps.map((w) => w.type)) };
  }

  /**
   * Stores wraps of a client_tss key's user share for types not stored yet (409 naming `wraps`
   * when one is: replace it with rewrap instead, so a wrap is never lost by a repeated PUT).
   */
  async putClientShare(p: Principal, rawKeyId: string, wraps: Wrap[]): Promise<ClientShareView> {
    return this.audited(
      p,
      'signing_key.client_share.store',
      { type: 'signing_key', id: rawKeyId },
      async () => {
        const user = manager(p, 'store client key shares');
        const checked = checkWraps(wraps);
        const key = await this.clientTssKey(user, rawKeyId);
        const r = await failClosed(this.deps.logger, 'signing_key.client_share.stored', () =>
          this.deps.store.insertWraps(key, user.userId, checked, (tx) =>
            writeSignerAudit(
              tx,
              auditOf(
                user,
                'signing_key.client_share.stored',
                { type: 'signing_key', id: key.id },
                {
                  agent_id: key.agentId,
                  wraps: checked.map(wrapSummary),
                },
              ),
            ),
          ),
        );
        if (r === 'conflict') {
          throw new ConflictError(
            'a wrap of this type is stored already; replace it with POST /v1/keys/{key_id}/client-share/rewrap',
            'wraps',
          );
        }
        return this.view(key);
      },
    );
  }

  /** The stored wraps, unopened, as they were sent (recorded `signing_key.client_share.read`). */
  async getClientShare(p: Principal, rawKeyId: string): Promise<ClientShareView> {
    return this.audited(
      p,
      'signing_key.client_share.read',
      { type: 'signing_key', id: rawKeyId },
      async () => {
        const user = manager(p, 'read client key shares');
        const key = await this.clientTssKey(user, rawKeyId);
        const v = await this.view(key);
        await failClosed(this.deps.logger, 'signing_key.client_share.read', () =>
          this.deps.db.transaction((tx) =>
            writeSignerAudit(
              tx,
              auditOf(
                user,
                'signing_key.client_share.read',
                { type: 'signing_key', id: key.id },
                {
                  agent_id: key.agentId,
                  types: v.wraps.map((w) => w.type),
                },
              ),
            ),
          ),
        );
        return v;
      },
    );
  }

  /** Replaces the stored wrap of the new wrap's type (404 naming `wrap.type` when there is none). */
  async rewrapClientShare(p: Principal, rawKeyId: string, wrap: Wrap): Promise<ClientShareView> {
    return this.audited(
      p,
      'signing_key.client_share.rewrap',
      { type: 'signing_key', id: rawKeyId },
      async () => {
        const user = manager(p, 'rewrap client key shares');
        const checked = checkWrap(wrap, 'wrap');
        const key = await this.clientTssKey(user, rawKeyId);
        const r = await failClosed(this.deps.logger, 'signing_key.client_share.rewrapped', () =>
          this.deps.store.replaceWrap(key, checked, (tx) =>
            writeSignerAudit(
              tx,
              auditOf(
                user,
                'signing_key.client_share.rewrapped',
                { type: 'signing_key', id: key.id },
                {
                  agent_id: key.agentId,
                  wrap: wrapSummary(checked),
                },
              ),
            ),
          ),
        );
        if (r === 'missing') throw new NotFoundError('client share wrap', checked.type);
        return this.view(key);
      },
    );
  }

  /**
   * Runs a custody request: a refusal it throws is recorded as `<action>.refused` with its reason
   * (problem type or kind), status and field, in a transaction of its own, then answered as thrown.
   * When the record cannot be written the answer is 503 (fail-closed).
   */
  private async audited<T>(
    p: Principal,
    action: string,
    resource: { type: string; id: string },
    step: () => Promise<T>,
  ): Promise<T> {
    try {
      return await step();
    } catch (err) {
      if (err instanceof CustosError && REFUSALS.has(err.kind)) {
        const record = auditOf(
          p,
          `${action}.refused`,
          { type: resource.type, id: isUuid(resource.id) ? resource.id.toLowerCase() : null },
          {
            reason: err.type !== 'about:blank' ? err.type : err.kind,
            status: err.httpStatus,
            ...(err.field ? { field: err.field } : {}),
          },
        );
        await failClosed(this.deps.logger, record.action, () =>
          this.deps.db.transaction((tx) => writeSignerAudit(tx, record)),
        );
      }
      throw err;
    }
  }
}
