import type { Principal } from '@custos/auth';
import { InvalidArgumentError, isUuid } from '@custos/service-kit';
import type { AccessService } from '../access/access-service.js';
import type { VaultStore } from '../vaults/vault-store.js';
import { parseEnvBundle, secretPath } from './secret-fns.js';
import { type SecretService, requirePasskeyUnlock } from './secret-service.js';

/** The vault whose env bundles every vault of the org inherits (docs/decisions.md). */
export const SHARED_VAULT_NAME = 'shared';
const ENVIRONMENT = /^[A-Za-z0-9_-]{1,64}$/;

/** Where a resolved variable came from. */
export type EnvSource = 'shared' | 'vault' | 'branch_override';

/** The answer of GET /v1/vaults/{id}/env-vars/resolve. */
export interface ResolvedEnv {
  vars: Record<string, string>;
  sources: Record<string, EnvSource>;
  environment: string;
  gitBranch: string;
  resolvedAt: Date;
}

/** The env bundle path of an environment, and of a branch override within it. */
export function bundlePath(environment: string, branch?: string): string {
  return branch ? `env/${environment}/branch/${branch}` : `env/${environment}`;
}

/**
 * Resolves env bundles (`env_bundle` secrets) with the precedence org shared < vault < branch
 * override: `env/<environment>` in the org's `shared` vault, then in this vault, then
 * `env/<environment>/branch/<git_branch>` in this vault. Bundles the caller may not read, or that
 * are missing, expired or exhausted, are skipped.
 */
export class EnvService {
  constructor(
    private readonly vaults: VaultStore,
    private readonly access: AccessService,
    private readonly secrets: SecretService,
  ) {}

  /** Merges the bundles that apply. */
  async resolve(p: Principal, vaultId: string, environmentIn: string, branch: string): Promise<ResolvedEnv> {
    const v = this.access.visible(p, isUuid(vaultId) ? await this.vaults.get(vaultId) : undefined, vaultId);
    // Resolving reads secret values: the passkey unlock of secret reads applies (spec §5.10). The
    // route forwards no X-Passkey-Token yet; until passkeys exist no token could be verified anyway.
    requirePasskeyUnlock(p, '');
    const environment = environmentIn || (p.kind === 'agent' && p.environment) || 'development';
    if (!ENVIRONMENT.test(environment)) {
      throw new InvalidArgumentError(
        'environment',
        'environment may hold letters, digits, "-" and "_" (1..64)',
      );
    }
    if (branch) secretPath(branch, 'git_branch');
    const layers: Array<{ source: EnvSource; vault: typeof v; path: string }> = [];
    const shared = await this.vaults.findByName(v.orgId, SHARED_VAULT_NAME);
    if (shared && shared.id !== v.id && this.canSee(p, shared)) {
      layers.push({ source: 'shared', vault: shared, path: bundlePath(environment) });
    }
    layers.push({ source: 'vault', vault: v, path: bundlePath(environment) });
    if (branch) layers.push({ source: 'branch_override', vault: v, path: bundlePath(environment, branch) });

    const vars: Record<string, string> = {};
    const sources: Record<string, EnvSource> = {};
    for (const layer of layers) {
      const value = await this.secrets.readBundle(p, layer.vault, layer.path);
      if (!value) continue;
      try {
        for (const [k, val] of Object.entries(parseEnvBundle(value))) {
          vars[k] = val;
          sources[k] = layer.source;
        }
      } finally {
        value.fill(0);
      }
    }
    return { vars, sources, environment, gitBranch: branch, resolvedAt: new Date() };
  }

  private canSee(p: Principal, v: Parameters<AccessService['visible']>[1]): boolean {
    try {
      this.access.visible(p, v, v?.id ?? '');
      return true;
    } catch {
      return false;
    }
  }
}
