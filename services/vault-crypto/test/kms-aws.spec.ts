import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { accessSync, constants } from 'node:fs';
import { type Socket, createServer } from 'node:net';
import path from 'node:path';
import { CreateKeyCommand, CreateAliasCommand, DisableKeyCommand, KMSClient } from '@aws-sdk/client-kms';
import { createLogger } from '@custos/service-kit';
import { AwsKms } from '../src/kms/aws-kms';
import { KeyUnwrapError, KmsUnavailableError } from '../src/kms/kms-errors';
import { createKmsProvider } from '../src/kms/kms-factory';
import { checkKmsHealth } from '../src/kms/kms-fns';
import type { KmsProvider } from '../src/kms/kms-types';

// AWS KMS provider against a real moto_server (pip install 'moto[server]'): the test starts its own
// on a free loopback port. Without moto_server the suite fails, naming what to install.

const logger = createLogger({ service: 'vault-crypto-test', level: 'silent' });
const REGION = 'eu-west-1';

function findMotoServer(): string {
  const candidates = [
    process.env.MOTO_SERVER,
    ...(process.env.PATH ?? '').split(path.delimiter).map((dir) => dir && path.join(dir, 'moto_server')),
    '/root/.pyenv/shims/moto_server',
  ];
  for (const file of candidates) {
    if (!file) continue;
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // next candidate
    }
  }
  throw new Error(
    "moto_server not found (looked at $MOTO_SERVER, $PATH and /root/.pyenv/shims): install it with `pip install 'moto[server]'`",
  );
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

async function waitForHttp(url: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`moto_server exited with code ${child.exitCode}`);
    try {
      await fetch(url, { signal: AbortSignal.timeout(1000) });
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  throw new Error(`moto_server did not answer at ${url} within ${timeoutMs} ms`);
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    // The pyenv shim execs python, so the pid is the server; the group catches any helper.
    if (child.pid) process.kill(-child.pid, 'SIGTERM');
  });
}

describe('aws-kms provider against moto_server', () => {
  let moto: ChildProcess;
  let endpoint: string;
  let admin: KMSClient;
  let keyArn: string;
  const savedEnv = { ...process.env };

  beforeAll(async () => {
    const bin = findMotoServer();
    const port = await freePort();
    endpoint = `http://127.0.0.1:${port}`;
    moto = spawn(bin, ['-H', '127.0.0.1', '-p', String(port)], { detached: true, stdio: 'ignore' });
    await waitForHttp(`${endpoint}/moto-api/`, moto, 30_000);
    // The SDK's default credential chain reads these; moto accepts any.
    Object.assign(process.env, { AWS_ACCESS_KEY_ID: 'testing', AWS_SECRET_ACCESS_KEY: 'testing' });
    delete process.env.AWS_PROFILE;
    delete process.env.AWS_SESSION_TOKEN;
    admin = new KMSClient({ region: REGION, endpoint });
    const key = await admin.send(new CreateKeyCommand({ Description: 'custos test' }));
    keyArn = key.KeyMetadata!.Arn!;
    await admin.send(new CreateAliasCommand({ AliasName: 'alias/custos-test', TargetKeyId: keyArn }));
  }, 60_000);

  afterAll(async () => {
    admin?.destroy();
    if (moto) await stop(moto);
    process.env = savedEnv;
  });

  const provider = (keyId = 'alias/custos-test') =>
    new AwsKms({ keyId, region: REGION, endpoint, timeoutMs: 5000 });

  it('wraps and unwraps under the same context, in the versioned format', async () => {
    const kms = provider();
    const dataKey = randomBytes(32);
    const wrapped = await kms.wrapKey(dataKey, 'custos:org-kek:o1:1');
    expect(wrapped[0]).toBe(1);
    expect(wrapped.includes(dataKey)).toBe(false);
    expect(await kms.unwrapKey(wrapped, 'custos:org-kek:o1:1')).toEqual(dataKey);
    // Another provider instance with the key ARN instead of the alias opens it too.
    expect(await provider(keyArn).unwrapKey(wrapped, 'custos:org-kek:o1:1')).toEqual(dataKey);
    await kms.close();
  });

  it('is built by the factory from the variables, taking the region from the key ARN', async () => {
    const kms = await createKmsProvider(
      { KMS_PROVIDER: 'aws-kms', AWS_KMS_KEY_ID: keyArn, AWS_KMS_ENDPOINT: endpoint },
      logger,
    );
    expect(kms.name).toBe('aws-kms');
    const dataKey = randomBytes(32);
    expect(await kms.unwrapKey(await kms.wrapKey(dataKey, 'c'), 'c')).toEqual(dataKey);
    await kms.close?.();
  });

  it('refuses another context, tampered bytes and an unknown format version', async () => {
    const kms = provider();
    const wrapped = await kms.wrapKey(randomBytes(32), 'custos:org-kek:o1:1');
    await expect(kms.unwrapKey(wrapped, 'custos:org-kek:o2:1')).rejects.toBeInstanceOf(KeyUnwrapError);
    const tampered = Buffer.from(wrapped);
    tampered[tampered.length - 1]! ^= 1;
    await expect(kms.unwrapKey(tampered, 'custos:org-kek:o1:1')).rejects.toBeInstanceOf(KeyUnwrapError);
    const otherVersion = Buffer.from(wrapped);
    otherVersion[0] = 2;
    await expect(kms.unwrapKey(otherVersion, 'custos:org-kek:o1:1')).rejects.toBeInstanceOf(KeyUnwrapError);
    await kms.close();
  });

  it('reports health through DescribeKey: ok, unknown key, disabled key', async () => {
    const kms = provider();
    expect(await checkKmsHealth(kms)).toMatchObject({ healthy: true, detail: '' });

    const missing = await checkKmsHealth(provider('alias/does-not-exist'));
    expect(missing.healthy).toBe(false);
    expect(missing.detail).toMatch(/aws-kms: DescribeKey failed: NotFoundException/);

    const other = await admin.send(new CreateKeyCommand({}));
    await admin.send(new DisableKeyCommand({ KeyId: other.KeyMetadata!.KeyId! }));
    const disabled = await checkKmsHealth(provider(other.KeyMetadata!.Arn!));
    expect(disabled).toMatchObject({ healthy: false });
    expect(disabled.detail).toMatch(/Disabled/);
    await kms.close();
  });

  it('turns an outage into a clear error and an unhealthy report, never a crash', async () => {
    const kms = provider();
    const dataKey = randomBytes(32);
    const wrapped = await kms.wrapKey(dataKey, 'ctx');
    await stop(moto);

    const health = await checkKmsHealth(kms);
    expect(health.healthy).toBe(false);
    expect(health.detail).toMatch(/aws-kms: DescribeKey failed: ECONNREFUSED/);

    const wrapError = await kms.wrapKey(dataKey, 'ctx').catch((e: unknown) => e);
    expect(wrapError).toBeInstanceOf(KmsUnavailableError);
    expect((wrapError as Error).message).toMatch(
      /^key-management provider aws-kms: Encrypt failed: ECONNREFUSED reaching http:\/\/127\.0\.0\.1:\d+$/,
    );
    expect((wrapError as KmsUnavailableError).kind).toBe('unavailable');
    // What a caller is told names neither the endpoint nor the key: those stay in the log.
    expect((wrapError as KmsUnavailableError).detail).toBe(
      'the key-management provider (aws-kms) is unavailable; try again later',
    );
    const unwrapError = await kms.unwrapKey(wrapped, 'ctx').catch((e: unknown) => e);
    expect(unwrapError).toBeInstanceOf(KmsUnavailableError);
    for (const e of [wrapError, unwrapError] as Error[]) {
      expect(e.message).not.toContain(dataKey.toString('base64'));
      expect(e.message).not.toContain(dataKey.toString('hex'));
    }
    await kms.close();
  });

  it('gives up on a KMS that does not answer within the timeout', async () => {
    // A listener that accepts and never replies.
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => sockets.add(socket));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const addr = silent.address();
    const port = typeof addr === 'object' && addr ? addr.port : 0;
    const kms: KmsProvider = new AwsKms({
      keyId: 'alias/x',
      region: REGION,
      endpoint: `http://127.0.0.1:${port}`,
      timeoutMs: 300,
    });
    await expect(kms.wrapKey(randomBytes(32), 'ctx')).rejects.toThrow(
      'key-management provider aws-kms: Encrypt failed: no answer within 300 ms',
    );
    await kms.close?.();
    for (const socket of sockets) socket.destroy();
    silent.close();
  });
});
