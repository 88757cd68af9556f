import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Metadata, status } from '@grpc/grpc-js';
import { writeTestMeshCerts } from '@custos/testing';
import { HealthClient } from '@custos/proto/grpc/health/v1/health';
import {
  VaultCryptoServiceClient,
  VaultCryptoServiceService,
} from '@custos/proto/custos/vault_crypto/v1/service';
import {
  CustosError,
  GrpcServer,
  InvalidArgumentError,
  MeshTls,
  ServingStatus,
  callUnary,
  createGrpcClient,
  createLogger,
  createMetrics,
  currentRequestContext,
  runWithRequestContext,
} from '../src';
import { freePort } from '../src/testing';

const logger = createLogger({ service: 'grpc-test', level: 'silent' });

describe('gRPC server and client', () => {
  let server: GrpcServer;
  let port: number;
  let behaviour: () => Promise<{ provider: string; healthy: boolean; detail: string; latencyMs: number }>;
  let dir: string;
  let serverTls: MeshTls;
  let gatewayTls: MeshTls;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-grpc-test-'));
    const { files } = await writeTestMeshCerts(dir, ['vault-crypto', 'gateway']);
    serverTls = new MeshTls(files['vault-crypto']!);
    gatewayTls = new MeshTls(files['gateway']!);
    server = new GrpcServer(logger, createMetrics('grpc-test'), serverTls);
    // Only getKmsHealth is exercised; add() wants a handler for every method of the service.
    const unused = Object.fromEntries(
      Object.keys(VaultCryptoServiceService).map((method) => [
        method,
        async () => {
          throw new Error(`${method} is not part of this test`);
        },
      ]),
    ) as unknown as Parameters<GrpcServer['add']>[1];
    server.add(
      VaultCryptoServiceService,
      { ...unused, getKmsHealth: () => behaviour() },
      { default: ['gateway'] },
    );
    port = await server.listen('127.0.0.1', 0);
    server.health.setAll(ServingStatus.SERVING);
  });
  afterAll(async () => {
    await server.shutdown(100);
    serverTls.close();
    gatewayTls.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const client = (forwardCaller = false) =>
    createGrpcClient(VaultCryptoServiceClient, `127.0.0.1:${port}`, {
      tls: gatewayTls,
      peer: 'vault-crypto',
      deadlineMs: 500,
      forwardCaller,
    });

  it('carries a domain error across the wire with its kind, field and extensions', async () => {
    behaviour = async () => {
      throw new InvalidArgumentError('name', 'name must not be empty');
    };
    const c = client();
    const err = await callUnary(c, c.getKmsHealth, {}, new Metadata()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CustosError);
    expect(err).toMatchObject({
      kind: 'invalid_argument',
      field: 'name',
      detail: 'name must not be empty',
      httpStatus: 400,
    });
    c.close();
  });

  it('hides unexpected errors behind INTERNAL without their message', async () => {
    behaviour = async () => {
      throw new Error('SELECT secret FROM vault WHERE id = 42');
    };
    const c = client();
    const raw = await new Promise<{ code?: number; details?: string }>((resolve) =>
      c.getKmsHealth({}, (e) => resolve(e ?? {})),
    );
    expect(raw.code).toBe(status.INTERNAL);
    expect(raw.details).toBe('internal error');
    c.close();
  });

  it("forwards the request id and (from the gateway's forwarding client) the caller credential", async () => {
    let seen: ReturnType<typeof currentRequestContext>;
    behaviour = async () => {
      seen = currentRequestContext();
      return { provider: 'local', healthy: true, detail: '', latencyMs: 0 };
    };
    const c = client(true);
    await runWithRequestContext({ requestId: 'req-77', authorization: 'Bearer abc' }, () =>
      callUnary(c, c.getKmsHealth, {}, new Metadata()),
    );
    expect(seen).toEqual({ requestId: 'req-77', caller: 'gateway', authorization: 'Bearer abc' });
    c.close();
  });

  it('applies the default deadline to a call that hangs', async () => {
    behaviour = () => new Promise(() => undefined);
    const c = client();
    const started = Date.now();
    const err = await callUnary(c, c.getKmsHealth, {}, new Metadata()).catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'unavailable' });
    expect(Date.now() - started).toBeLessThan(5000);
    c.close();
  });

  it('answers grpc.health.v1 for the server and each registered service', async () => {
    const h = createGrpcClient(HealthClient, `127.0.0.1:${port}`, { tls: gatewayTls, peer: 'vault-crypto' });
    const whole = await callUnary(h, h.check, { service: '' }, new Metadata());
    expect(whole.status).toBe(ServingStatus.SERVING);
    const named = await callUnary(
      h,
      h.check,
      { service: 'custos.vault_crypto.v1.VaultCryptoService' },
      new Metadata(),
    );
    expect(named.status).toBe(ServingStatus.SERVING);
    const unknown = await callUnary(h, h.check, { service: 'nope' }, new Metadata()).catch((e: unknown) => e);
    expect(unknown).toMatchObject({ kind: 'not_found' });
    h.close();
  });

  it('fails fast with UNAVAILABLE when the peer is down, after bounded retries', async () => {
    const dead = await freePort();
    const c = createGrpcClient(VaultCryptoServiceClient, `127.0.0.1:${dead}`, {
      tls: gatewayTls,
      peer: 'vault-crypto',
      deadlineMs: 3000,
      maxAttempts: 3,
    });
    const err = await callUnary(c, c.getKmsHealth, {}, new Metadata()).catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'unavailable' });
    c.close();
  });
});
