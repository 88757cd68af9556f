#!/usr/bin/env node
// Custos dev mode (`pnpm dev`): Postgres, NATS and Redis (from the environment, already running, or
// started here), then the nine services on loopback, each its own process, started and supervised
// by @custos/mesh (tools/mesh), the one mesh launcher; waits for the gateway's /v1/health and prints
// where to go. Ctrl-C stops everything it started. See README.md beside it.
//
// This file only makes sure @custos/mesh and the services are built, then hands over to
// lib/dev-mode.mjs (which imports @custos/mesh, so it can only be loaded after the build).
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ensureBuilt } from './lib/build.mjs';
import { DevError, shout } from './lib/util.mjs';

const USAGE = `usage: node tools/dev/launch.mjs [--infra-only]

Starts Custos in dev mode: Postgres, NATS and Redis, then the nine services on 127.0.0.1.
  --infra-only   start only Postgres/NATS/Redis and print their URLs (to run services by hand)
Variables: DATABASE_URL, NATS_URL, REDIS_URL, PORT, LOG_LEVEL, CUSTOS_DEV_DIR, CUSTOS_DEV_PG_PORT,
CUSTOS_DEV_NATS_PORT, CUSTOS_DEV_REDIS_PORT, NATS_STREAM, NATS_SUBJECT_PREFIX (tools/dev/README.md).`;

/** Runs dev mode; resolves to the process exit code. */
export async function main(argv = process.argv.slice(2)) {
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(USAGE);
    return 0;
  }
  const unknown = argv.filter((a) => a !== '--infra-only');
  if (unknown.length > 0) {
    console.error(`unknown argument ${unknown[0]}\n${USAGE}`);
    return 2;
  }
  const infraOnly = argv.includes('--infra-only');
  try {
    await ensureBuilt({ infraOnly });
  } catch (err) {
    if (!(err instanceof DevError)) throw err;
    shout(err.message);
    return 1;
  }
  const { runDevMode } = await import('./lib/dev-mode.mjs');
  return runDevMode({ infraOnly });
}

const invokedDirectly = (() => {
  try {
    return fs.realpathSync(process.argv[1] ?? '') === fs.realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
})();

if (invokedDirectly) {
  main().then(
    (code) => process.exit(code),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
