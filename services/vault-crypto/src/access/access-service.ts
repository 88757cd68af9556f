import { type Principal, scopesCover } from '@custos/auth';
import { NotFoundError, PermissionDeniedError } from '@custos/service-kit';
import type { PolicyClient } from '../peers/policy-client.js';
import type { DecisionCache } from './decision-cache.js';
import type { VaultRow } from '../vaults/vault-store.js';
import { agentSeesVault, managesVault } from './access-fns.js';

/** What a principal wants to do with secrets. */
export type Permission = 'read' | 'write';

/**
 * Decides secret operations (ARCHITECTURE §1): the vault's owner and the org's owners and admins
 * are allowed; anyone else needs the policy service's allow for this path and permission, and an
 * agent additionally needs the path inside its token's scopes and the vault in its `vault_ids`.
 */
export class AccessService {
  constructor(
    private readonly policy: Pick<PolicyClient, 'decide'>,
    private readonly decisions?: DecisionCache,
  ) {}

  /** The vault as the caller may see it: another org's or a hidden vault is 404, a system vault 403. */
  visible(p: Principal, v: VaultRow | undefined, id: string): VaultRow {
    if (!v || v.orgId !== p.orgId) throw new NotFoundError('vault', id);
    // Spec §4.3: a system vault answers 403 to everyone of its org, agents included.
    if (v.isSystem) {
      throw new PermissionDeniedError('system vaults are not available through the secrets API');
    }
    if (!agentSeesVault(p, v)) throw new NotFoundError('vault', id);
    return v;
  }

  /** Throws 403 unless the principal may perform `permission` on `path` of the vault. */
  async authorize(p: Principal, v: VaultRow, path: string, permission: Permission): Promise<void> {
    if (!(await this.allowed(p, v, path, permission))) {
      throw new PermissionDeniedError(`no policy allows ${permission} on this path`);
    }
  }

  /** Whether the principal may perform `permission` on `path` of the vault. */
  async allowed(p: Principal, v: VaultRow, path: string, permission: Permission): Promise<boolean> {
    if (managesVault(p, v)) return true;
    if (p.kind === 'agent' && (!p.vaultIds.includes(v.id) || !scopesCover(p.scopes, path))) return false;
    const cache = this.decisions?.enabled ? this.decisions : undefined;
    // The generation is read before policy is asked (DecisionCache): an answer that raced a grant
    // change carries the generation from before it.
    const generation = cache ? await cache.generation(v.orgId) : undefined;
    const question =
      p.kind === 'user'
        ? `user:${p.userId}:${p.orgId}::${v.id}:${permission}:${path}`
        : `agent:${p.agentId}:${p.orgId}:${p.environment ?? ''}:${v.id}:${permission}:${path}`;
    if (cache && generation !== undefined) {
      const hit = cache.get(question, generation);
      if (hit !== undefined) return hit;
    }
    const askedAt = cache?.clock() ?? 0;
    const d = await this.policy.decide({
      principal: p,
      vaultId: v.id,
      vaultOrgId: v.orgId,
      path,
      permission,
    });
    if (cache && generation !== undefined)
      cache.set(question, generation, d.allowed, d.cacheableForMs, askedAt);
    return d.allowed;
  }

  /** The subset of `paths` the principal may read, asked a few at a time. */
  async readable(p: Principal, v: VaultRow, paths: readonly string[]): Promise<Set<string>> {
    if (managesVault(p, v)) return new Set(paths);
    const out = new Set<string>();
    const queue = [...paths];
    const worker = async () => {
      for (let path = queue.shift(); path !== undefined; path = queue.shift()) {
        if (await this.allowed(p, v, path, 'read')) out.add(path);
      }
    };
    await Promise.all(Array.from({ length: Math.min(8, queue.length) }, worker));
    return out;
  }
}
