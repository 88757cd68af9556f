import fs from 'node:fs';
import path from 'node:path';
import type { MeshNatsAccess, MeshRedisAccess } from '@custos/mesh';
import type { SharedProfile } from './profiles';

/** The variable naming the file that describes the shared meshes of this test run. */
export const SHARED_RUN_VAR = 'CUSTOS_E2E_SHARED';

/** One shared mesh, as the global setup started it. */
export interface SharedMeshInfo {
  baseUrl: string;
  env: Record<string, string>;
  /** `<logDir>/<service>.log` holds each service's output. */
  logDir: string;
  /** The mesh's own NATS: each service's login and the test user's. */
  nats?: MeshNatsAccess;
  /** The mesh's own Redis: each service's REDIS_URL and the test user's. */
  redis?: MeshRedisAccess;
}

/** What the global setup started, for the spec files (written to a file; jest workers read it). */
export interface SharedRunInfo {
  runDir: string;
  mail: { dir: string; url: string; port: number };
  google: {
    jwksUrl: string;
    clientId: string;
    kid: string;
    privateKeyPem: string;
    publicJwk: Record<string, unknown>;
  };
  federation: { privateKeyFile: string; publicKeyPem: string };
  meshes: Partial<Record<SharedProfile, SharedMeshInfo>>;
}

/** Writes the run's description into its folder and names it in the environment of the workers. */
export function publishSharedRun(info: SharedRunInfo): void {
  const file = path.join(info.runDir, 'shared.json');
  fs.writeFileSync(file, JSON.stringify(info, null, 2), { mode: 0o600 });
  process.env[SHARED_RUN_VAR] = file;
}

/** The description of this run's shared meshes; throws when the global setup started none. */
export function sharedRun(): SharedRunInfo {
  const file = process.env[SHARED_RUN_VAR];
  if (!file || !fs.existsSync(file)) {
    throw new Error(
      `no shared meshes in this run (${SHARED_RUN_VAR} is not set): run the specs with tools/e2e/jest.config.cjs, whose global setup starts them`,
    );
  }
  return JSON.parse(fs.readFileSync(file, 'utf8')) as SharedRunInfo;
}
