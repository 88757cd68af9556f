import { holder, postgresHolder, stopShared } from './shared-state';

/**
 * Jest global teardown: stops what the global setup started. A service that exited during the run
 * fails it, with its last lines (the logs are kept then).
 */
export default async function globalTeardown(): Promise<void> {
  try {
    await stopMeshes();
  } finally {
    const pg = postgresHolder.__custosE2ePostgres;
    postgresHolder.__custosE2ePostgres = undefined;
    await pg?.destroy();
  }
}

async function stopMeshes(): Promise<void> {
  const state = holder.__custosE2eShared;
  if (!state) return;
  holder.__custosE2eShared = undefined;
  const crashes = await stopShared(state);
  if (crashes.length > 0) {
    const lines = crashes.map(
      (c) => `${c.profile}/${c.service} (pid ${c.pid}) exited: ${c.description}\n  ${c.tail.join('\n  ')}`,
    );
    throw new Error(
      `services of the shared meshes exited during the run (logs in ${state.runDir}):\n${lines.join('\n')}`,
    );
  }
}
