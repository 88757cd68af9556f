import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { launchMesh } from '@custos/mesh';
import { createTestDatabase } from '@custos/service-kit/testing';
import { newIdpKey, startGoogleIdp } from './google-idp';
import { PrivatePostgres, postgresBinDir } from './private-postgres';
import { startMailSpool } from './mail-spool';
import {
  GOOGLE_CLIENT_ID,
  SHARED_PROFILES,
  SMTP_PASSWORD,
  SMTP_USER,
  type SharedProfile,
  type SharedResources,
  profileEnv,
} from './profiles';
import { type SharedRunInfo, publishSharedRun } from './shared-run';
import { type SharedState, holder, postgresHolder, stopShared } from './shared-state';

const ASKS = /sharedMesh\(\s*(?:'([a-z-]+)'\s*)?\)/g;

/** The profiles a spec file asks for: `sharedMesh()` is `default`, `sharedMesh('strict')` is `strict`. */
export function profilesAskedFor(source: string): SharedProfile[] {
  const out = new Set<SharedProfile>();
  for (const m of source.matchAll(ASKS)) {
    const p = (m[1] ?? 'default') as SharedProfile;
    if (!SHARED_PROFILES.includes(p))
      throw new Error(`sharedMesh('${p}'): no such profile (src/profiles.ts)`);
    out.add(p);
  }
  return [...out];
}

function specFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return specFiles(p);
    return e.name.endsWith('.spec.ts') ? [p] : [];
  });
}

/** The profiles of the spec files this run selects (by jest's path patterns), so a run of one file boots only what it uses. */
function profilesOfRun(rootDir: string, testPathPatterns: unknown): SharedProfile[] {
  const raw = Array.isArray(testPathPatterns)
    ? (testPathPatterns as string[])
    : ((testPathPatterns as { patterns?: string[] } | undefined)?.patterns ?? []);
  const patterns = raw.map((p) => new RegExp(p, 'i'));
  const selected = specFiles(path.join(rootDir, 'test')).filter(
    (f) => patterns.length === 0 || patterns.some((re) => re.test(f)),
  );
  const profiles = new Set(selected.flatMap((f) => profilesAskedFor(fs.readFileSync(f, 'utf8'))));
  return SHARED_PROFILES.filter((p) => profiles.has(p));
}

async function bootProfile(
  profile: SharedProfile,
  runDir: string,
  resources: SharedResources,
): Promise<SharedState['meshes'][number]> {
  const database = await createTestDatabase('custos_e2e');
  const logDir = path.join(runDir, profile, 'logs');
  const mailDir = path.join(runDir, profile, 'mail-dir');
  fs.mkdirSync(logDir, { recursive: true });
  fs.mkdirSync(mailDir, { recursive: true });
  try {
    const mesh = await launchMesh({
      profile: 'test',
      databaseUrl: database.url,
      mailDir,
      certDir: path.join(runDir, profile, 'certs'),
      extraEnv: profileEnv(profile, resources),
      // A local EVM chain (anvil, 31337) per shared mesh: signer registers it as the chain `anvil`.
      anvil: true,
      logDir,
      // Straight into files: nothing passes through jest's main process.
      output: 'file',
      // Several meshes start at once, on a small machine that may be busy with more: a service that
      // exits gives up at once, so the long wait only ever covers slowness.
      healthTimeoutMs: 300_000,
    });
    return { profile, mesh, drop: database.drop };
  } catch (err) {
    await database.drop();
    throw new Error(`shared mesh '${profile}': ${(err as Error).message}`);
  }
}

/**
 * The run's databases live in a Postgres cluster of its own (fsync off, 300 connections): the suite's
 * meshes hold up to 45 connections each, and beside the other packages' tests (turbo runs two at a
 * time) the machine server's 100 ran out (seen in CI: a vault create answered 503). The workers
 * inherit TEST_DATABASE_URL. Skipped when TEST_DATABASE_URL is set (the caller chose a server) or
 * when this machine has no Postgres server programs.
 */
async function ownPostgres(): Promise<void> {
  if (process.env.TEST_DATABASE_URL || postgresBinDir() === undefined) return;
  let pg: PrivatePostgres;
  try {
    pg = await PrivatePostgres.start({ fast: true, maxConnections: 300 });
  } catch (err) {
    // No OS user postgres, a folder it cannot enter...: the machine's server, as before.
    process.stdout.write(
      `\nno private Postgres cluster (${(err as Error).message.split('\n')[0]}); using the machine's\n`,
    );
    return;
  }
  postgresHolder.__custosE2ePostgres = pg;
  process.env.TEST_DATABASE_URL = pg.url();
  // A run that ends without the teardown (an interrupted jest, a cancelled CI job) leaves no
  // server behind.
  process.once('exit', () => pg.destroySync());
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      pg.destroySync();
      process.kill(process.pid, signal);
    });
  }
}

/**
 * Jest global setup: boots one mesh per environment profile the selected spec files ask for, once
 * for the whole run, with the mail spool, the Google stand-in and the federation key they use, and
 * tells the spec files where they are (SHARED_RUN_VAR).
 */
export default async function globalSetup(
  globalConfig: { testPathPatterns?: unknown },
  projectConfig: { rootDir: string },
): Promise<void> {
  await ownPostgres();
  const profiles = profilesOfRun(projectConfig.rootDir, globalConfig.testPathPatterns);
  if (profiles.length === 0) return;
  const started = Date.now();
  const runDir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-e2e-run-'));
  const spool = await startMailSpool(path.join(runDir, 'mail'));
  const googleKey = newIdpKey();
  const google = await startGoogleIdp(GOOGLE_CLIENT_ID, googleKey);
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const federationKeyFile = path.join(runDir, 'federation.pem');
  fs.writeFileSync(federationKeyFile, privateKey.export({ format: 'pem', type: 'pkcs8' }), { mode: 0o600 });
  const smtpUrl = spool.url(SMTP_USER, SMTP_PASSWORD);
  const resources: SharedResources = { smtpUrl, federationKeyFile, googleJwksUrl: google.jwksUrl };

  const results = await Promise.allSettled(profiles.map((p) => bootProfile(p, runDir, resources)));
  const meshes = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const state: SharedState = { runDir, meshes, spool, google };
  holder.__custosE2eShared = state;
  // A run that ends without the teardown (an interrupted jest) leaves no services behind.
  process.once('exit', () => {
    for (const m of meshes) m.mesh.abandon();
  });
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    holder.__custosE2eShared = undefined;
    await stopShared(state);
    throw failed.reason;
  }

  const info: SharedRunInfo = {
    runDir,
    mail: { dir: path.join(runDir, 'mail'), url: smtpUrl, port: spool.port },
    google: {
      jwksUrl: google.jwksUrl,
      clientId: GOOGLE_CLIENT_ID,
      kid: googleKey.kid,
      privateKeyPem: googleKey.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
      publicJwk: googleKey.publicJwk,
    },
    federation: {
      privateKeyFile: federationKeyFile,
      publicKeyPem: publicKey.export({ format: 'pem', type: 'spki' }).toString(),
    },
    meshes: Object.fromEntries(
      meshes.map((m) => [
        m.profile,
        {
          baseUrl: m.mesh.baseUrl,
          env: m.mesh.env,
          logDir: path.join(runDir, m.profile, 'logs'),
          ...(m.mesh.nats ? { nats: m.mesh.nats } : {}),
          ...(m.mesh.redis ? { redis: m.mesh.redis } : {}),
        },
      ]),
    ),
  };
  publishSharedRun(info);
  const took = ((Date.now() - started) / 1000).toFixed(1);
  process.stdout.write(
    `\nshared meshes (${took} s): ${meshes.map((m) => `${m.profile} ${m.mesh.baseUrl}`).join(', ')}; logs in ${runDir}; databases on ${postgresHolder.__custosE2ePostgres ? `a private cluster, port ${postgresHolder.__custosE2ePostgres.port}` : process.env.TEST_DATABASE_URL ? 'TEST_DATABASE_URL' : 'the machine server'}\n`,
  );
}
