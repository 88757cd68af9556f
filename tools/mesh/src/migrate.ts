import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import path from 'node:path';
import { REPO_ROOT, SERVICES, type ServiceName } from './services';

/** The services with a Postgres schema of their own, each with a `migrate` entry: all but the gateway. */
export const DATABASE_SERVICES: readonly ServiceName[] = SERVICES.filter((s) => s !== 'gateway');

/** The login role a service connects as: `custos_<name>`, dashes as underscores. */
export function databaseRole(service: ServiceName): string {
  return `custos_${service.replace(/-/g, '_')}`;
}

/** The migration entry point of a service: `<root>/services/<name>/dist/migrate.js`. */
export function migrateMain(service: ServiceName, root: string = REPO_ROOT): string {
  return path.join(root, 'services', service, 'dist', 'migrate.js');
}

/**
 * A password for a service role, derived from the owner's: stable across launches and across meshes
 * on one cluster (so one mesh never changes the password another is using), and telling nothing
 * about the owner's password.
 */
export function derivedRolePassword(ownerPassword: string, role: string): string {
  return createHmac('sha256', ownerPassword).update(`custos database role ${role}`).digest('base64url');
}

/** `ownerUrl` with `role` as its user and `password` (or none). */
export function roleUrl(ownerUrl: string, role: string, password?: string): string {
  const url = new URL(ownerUrl);
  url.username = role;
  url.password = password === undefined ? '' : encodeURIComponent(password);
  return url.toString();
}

/** Where the services of a mesh connect after its migrations. */
export interface MeshDatabase {
  /** The schema owner's URL (migrations; tests' own SQL). No service gets it. */
  ownerUrl: string;
  /** Each migrated service's own URL, as its role. */
  urls: Partial<Record<ServiceName, string>>;
  /** A service's own DATABASE_URL for serviceEnv; `undefined` (none at all) for a service without a schema. */
  envOf(service: ServiceName): { DATABASE_URL: string | undefined };
}

/** How to migrate a mesh's database. */
export interface MigrateMeshOptions {
  /** The schema owner's URL. */
  databaseUrl: string;
  /** The services of the mesh (default: all nine); those with a schema are migrated. */
  services?: readonly ServiceName[];
  /** Repository root the services run from (default: this checkout). */
  root?: string;
  /**
   * Each role's password. Default: none when the owner's URL has none (trust auth, the tests),
   * else derived from the owner's password (derivedRolePassword).
   */
  rolePassword?: (service: ServiceName, role: string) => string | undefined;
  /** Default: PATH only. */
  baseEnv?: Readonly<Record<string, string | undefined>>;
  /** How long one service's migrations may take (default 120 s). */
  timeoutMs?: number;
}

function runMigrate(
  service: ServiceName,
  root: string,
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [migrateMain(service, root)],
      { cwd: root, env, timeout: timeoutMs, maxBuffer: 4 << 20 },
      (err, stdout, stderr) => {
        if (!err) return resolve();
        const tail = `${stdout}\n${stderr}`.split('\n').filter(Boolean).slice(-8).join('\n  ');
        const why = err.killed ? `killed after ${timeoutMs} ms` : `exit code ${String(err.code)}`;
        reject(new Error(`${service} migrations failed (${why}):\n  ${tail || '(no output)'}`));
      },
    );
  });
}

/**
 * Runs the `migrate` entry of every service of the mesh that has a schema, in parallel, as the
 * schema owner; each provisions its service's login role. Returns where each service connects.
 * Throws naming every service whose migrations failed.
 */
export async function migrateMesh(o: MigrateMeshOptions): Promise<MeshDatabase> {
  const root = o.root ?? REPO_ROOT;
  const ownerPassword = decodeURIComponent(new URL(o.databaseUrl).password);
  const passwordOf =
    o.rolePassword ??
    ((_s: ServiceName, role: string) =>
      ownerPassword ? derivedRolePassword(ownerPassword, role) : undefined);
  const services = (o.services ?? SERVICES).filter((s) => DATABASE_SERVICES.includes(s));
  const base: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(o.baseEnv ?? { PATH: process.env.PATH ?? '' }))
    if (v !== undefined) base[k] = v;
  const urls: Partial<Record<ServiceName, string>> = {};
  const results = await Promise.allSettled(
    services.map(async (service) => {
      const role = databaseRole(service);
      const password = passwordOf(service, role);
      await runMigrate(
        service,
        root,
        {
          ...base,
          DATABASE_URL: o.databaseUrl,
          DATABASE_SERVICE_ROLE: role,
          ...(password !== undefined ? { DATABASE_SERVICE_PASSWORD: password } : {}),
        },
        o.timeoutMs ?? 120_000,
      );
      urls[service] = roleUrl(o.databaseUrl, role, password);
    }),
  );
  const failures = results.flatMap((r) => (r.status === 'rejected' ? [(r.reason as Error).message] : []));
  if (failures.length > 0) throw new Error(failures.join('\n'));
  return {
    ownerUrl: o.databaseUrl,
    urls,
    envOf: (service) => ({ DATABASE_URL: urls[service] }),
  };
}
