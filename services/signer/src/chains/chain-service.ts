import type { Principal } from '@custos/auth';
import { auditOf } from '@custos/events';
import {
  ConflictError,
  InvalidArgumentError,
  type Logger,
  NotFoundError,
  PermissionDeniedError,
} from '@custos/service-kit';
import { failClosed, writeSignerAudit } from '../audit/signer-audit.js';
import {
  checkChainChange,
  checkNewChain,
  findChain,
  parseChainIdentifier,
  parseRpcUrlMap,
} from './chain-fns.js';
import { SEED_CHAINS, localChain } from './chain-seeds.js';
import type { ChainStore } from './chain-store.js';
import type { ChainRecord } from './chain-types.js';

function requirePlatformAdmin(p: Principal, what: string): void {
  if (p.kind !== 'user' || !p.platformAdmin)
    throw new PermissionDeniedError(`only a platform admin may ${what}`);
}

const isAdmin = (p: Principal) => p.kind === 'user' && p.platformAdmin;

function chainDetails(c: ChainRecord): Record<string, unknown> {
  return { name: c.name, chain_id: c.chainId.toString(), family: c.family, is_enabled: c.isEnabled };
}

/**
 * The chains registry: seeded at start-up, read by every signed-in principal (enabled chains),
 * edited by platform admins; signing keys and (next) transactions resolve their chain here.
 */
export class ChainService {
  constructor(
    private readonly store: ChainStore,
    private readonly logger: Logger,
  ) {}

  /**
   * Start-up: inserts the seed chains that are missing, applies the install's CHAIN_RPC_URLS and,
   * given a local EVM node (dev and tests), registers it as the enabled testnet chain `anvil`.
   */
  async bootstrap(o: { rpcUrls: string; localRpcUrl: string }): Promise<void> {
    await this.store.seed(SEED_CHAINS);
    for (const [name, url] of parseRpcUrlMap(o.rpcUrls)) {
      if (!(await this.store.setRpcUrl(name, url))) {
        this.logger.warn({ chain: name }, 'CHAIN_RPC_URLS names a chain the registry does not have');
      }
    }
    if (o.localRpcUrl) await this.store.upsertLocal(localChain(o.localRpcUrl));
  }

  /** The enabled chains; every chain with `includeDisabled` (platform admins). */
  async list(p: Principal, includeDisabled: boolean): Promise<ChainRecord[]> {
    if (includeDisabled) requirePlatformAdmin(p, 'list disabled chains');
    const all = await this.store.all();
    return includeDisabled ? all : all.filter((c) => c.isEnabled);
  }

  /** One chain by UUID, number or name; a disabled one only to platform admins (404 otherwise). */
  async get(p: Principal, identifier: string): Promise<ChainRecord> {
    const c = findChain(await this.store.all(), parseChainIdentifier(identifier, 'identifier'));
    if (!c || (!c.isEnabled && !isAdmin(p))) throw new NotFoundError('chain', identifier);
    return c;
  }

  /**
   * The chain a request names in `field`, for keys and transactions: 400 naming the field when it
   * is unknown, or disabled unless `allowDisabled` (rotating the key of a disabled chain's family).
   */
  async resolve(identifier: string, field: string, allowDisabled = false): Promise<ChainRecord> {
    const c = findChain(await this.store.all(), parseChainIdentifier(identifier, field));
    if (!c) throw new InvalidArgumentError(field, `unknown chain "${identifier.slice(0, 64)}"`);
    if (!c.isEnabled && !allowDisabled)
      throw new InvalidArgumentError(field, `chain "${c.name}" is disabled`);
    return c;
  }

  /** Adds a chain (platform admins); 409 when the name or the family's chain id is taken. */
  async create(p: Principal, req: Parameters<typeof checkNewChain>[0]): Promise<ChainRecord> {
    requirePlatformAdmin(p, 'add chains');
    const row = checkNewChain(req);
    const r = await failClosed(this.logger, 'chain.created', () =>
      this.store.create(row, (tx, c) =>
        writeSignerAudit(tx, auditOf(p, 'chain.created', { type: 'chain', id: c.id }, chainDetails(c))),
      ),
    );
    if (r === 'taken')
      throw new ConflictError(`a chain named "${row.name}" or with chain_id ${row.chainId} exists`, 'name');
    return r;
  }

  /** Changes or disables a chain (platform admins). */
  async update(
    p: Principal,
    identifier: string,
    req: Parameters<typeof checkChainChange>[0],
  ): Promise<ChainRecord> {
    requirePlatformAdmin(p, 'change chains');
    const change = checkChainChange(req);
    const c = findChain(await this.store.all(), parseChainIdentifier(identifier, 'identifier'));
    if (!c) throw new NotFoundError('chain', identifier);
    const changed = Object.keys(change);
    const r = await failClosed(this.logger, 'chain.updated', () =>
      this.store.update(c.id, change, (tx, row) =>
        writeSignerAudit(
          tx,
          auditOf(p, 'chain.updated', { type: 'chain', id: row.id }, { ...chainDetails(row), changed }),
        ),
      ),
    );
    if (!r) throw new NotFoundError('chain', identifier);
    return r;
  }
}
