import fs from 'node:fs';
import type { LaunchedMesh, ServiceExitEvent } from '@custos/mesh';
import type { GoogleIdp } from './google-idp';
import type { MailSpool } from './mail-spool';
import type { PrivatePostgres } from './private-postgres';
import type { SharedProfile } from './profiles';

/** What the global setup started and the global teardown stops (jest runs both in its main process). */
export interface SharedState {
  runDir: string;
  meshes: Array<{ profile: SharedProfile; mesh: LaunchedMesh; drop: () => Promise<void> }>;
  spool: MailSpool;
  google: GoogleIdp;
}

/** Where the global setup leaves the state for the global teardown. */
export const holder = globalThis as typeof globalThis & { __custosE2eShared?: SharedState };

/** The run's own Postgres cluster (global setup), which the global teardown removes after the meshes. */
export const postgresHolder = globalThis as typeof globalThis & { __custosE2ePostgres?: PrivatePostgres };

/**
 * Stops the shared meshes, drops their databases, closes the spool and the Google stand-in, and
 * removes the run folder unless a service crashed or CUSTOS_E2E_KEEP_LOGS=1. Returns the crashes.
 */
export async function stopShared(state: SharedState): Promise<Array<ServiceExitEvent & { profile: string }>> {
  const crashes = state.meshes.flatMap((m) =>
    m.mesh.supervisor.crashes.map((c) => ({ ...c, profile: m.profile })),
  );
  await Promise.all(
    state.meshes.map(async (m) => {
      await m.mesh.stop(10_000);
      await m.drop();
    }),
  );
  await state.spool.close();
  await state.google.close();
  if (crashes.length === 0 && process.env.CUSTOS_E2E_KEEP_LOGS !== '1') {
    fs.rmSync(state.runDir, { recursive: true, force: true });
  }
  return crashes;
}
