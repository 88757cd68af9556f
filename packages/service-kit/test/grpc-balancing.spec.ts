// Scale-out over gRPC: a client spreads its calls over every address its target resolves to
// (round_robin), and a server's GRPC_MAX_CONNECTION_AGE_MS makes clients reconnect (and so
// re-resolve and find new pods) without failing a call. Real servers, real mTLS, real sockets.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Metadata, type ServerUnaryCall } from '@grpc/grpc-js';
import { writeTestMeshCerts } from '@custos/testing';
import {
  VaultCryptoServiceClient,
  VaultCryptoServiceService,
} from '@custos/proto/custos/vault_crypto/v1/service';
import {
  GrpcServer,
  type GrpcServerOptions,
  MeshTls,
  ServingStatus,
  callUnary,
  createGrpcClient,
  createLogger,
  createMetrics,
  env,
  grpcServerConfigShape,
  loadConfig,
} from '../src';
import { freePort } from '../src/testing';

const logger = createLogger({ service: 'grpc-balancing-test', level: 'silent' });

/** A vault-crypto server on `host:port` that records the client address (ip:port) of every call. */
async function startServer(tls: MeshTls, host: string, port: number, options: GrpcServerOptions = {}) {
  const peers: string[] = [];
  const server = new GrpcServer(logger, createMetrics(`balancing-${host}-${port}`), tls, options);
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
    {
      ...unused,
      getKmsHealth: async (_req: unknown, call: ServerUnaryCall<unknown, unknown>) => {
        peers.push(call.getPeer());
        return { provider: host, healthy: true, detail: '', latencyMs: 0 };
      },
    },
    { default: ['gateway'] },
  );
  const bound = await server.listen(host, port);
  server.health.setAll(ServingStatus.SERVING);
  return { server, peers, port: bound };
}

describe('gRPC balancing and connection age', () => {
  let dir: string;
  let serverTls: MeshTls;
  let gatewayTls: MeshTls;
  const servers: GrpcServer[] = [];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-grpc-balancing-'));
    const { files } = await writeTestMeshCerts(dir, ['vault-crypto', 'gateway']);
    serverTls = new MeshTls(files['vault-crypto']!);
    gatewayTls = new MeshTls(files['gateway']!);
  });
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.shutdown(100)));
  });
  afterAll(() => {
    serverTls.close();
    gatewayTls.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const clientOf = (target: string) =>
    createGrpcClient(VaultCryptoServiceClient, target, {
      tls: gatewayTls,
      peer: 'vault-crypto',
      deadlineMs: 2000,
    });
  const call = (c: VaultCryptoServiceClient) => callUnary(c, c.getKmsHealth, {}, new Metadata());

  it('spreads calls over every address of the target (two servers on one port, two loopback IPs)', async () => {
    const port = await freePort();
    const a = await startServer(serverTls, '127.0.0.1', port);
    const b = await startServer(serverTls, '127.0.0.2', port);
    servers.push(a.server, b.server);
    const c = clientOf(`ipv4:127.0.0.1:${port},127.0.0.2:${port}`);
    try {
      const answers = [];
      for (let i = 0; i < 20; i++) answers.push(await call(c));
      // round_robin alternates once both subchannels are ready; pick_first would send all 20 to one.
      expect(a.peers.length).toBeGreaterThanOrEqual(5);
      expect(b.peers.length).toBeGreaterThanOrEqual(5);
      expect(a.peers.length + b.peers.length).toBe(20);
      expect(new Set(answers.map((r) => r.provider))).toEqual(new Set(['127.0.0.1', '127.0.0.2']));
    } finally {
      c.close();
    }
  });

  it('reaches a peer through a dns:/// target, the mesh certificate checked against the peer name', async () => {
    const port = await freePort();
    const a = await startServer(serverTls, '127.0.0.1', port);
    servers.push(a.server);
    // `localhost` is the host name here, not an address in the certificate: the client's SNI and
    // identity check use the peer name ('vault-crypto'), whatever the target resolves through.
    const c = clientOf(`dns:///localhost:${port}`);
    try {
      await expect(call(c)).resolves.toMatchObject({ provider: '127.0.0.1', healthy: true });
      expect(a.peers).toHaveLength(1);
    } finally {
      c.close();
    }
  });

  it('keeps one connection for all calls when no connection age is set', async () => {
    const port = await freePort();
    const a = await startServer(serverTls, '127.0.0.1', port);
    servers.push(a.server);
    const c = clientOf(`127.0.0.1:${port}`);
    try {
      for (let i = 0; i < 12; i++) {
        await call(c);
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(new Set(a.peers).size).toBe(1);
    } finally {
      c.close();
    }
  });

  it('closes a connection past its age: the client reconnects and every call still succeeds', async () => {
    const port = await freePort();
    const a = await startServer(serverTls, '127.0.0.1', port, {
      maxConnectionAgeMs: 300,
      maxConnectionAgeGraceMs: 1000,
    });
    servers.push(a.server);
    const c = clientOf(`dns:///localhost:${port}`);
    try {
      const results: Array<'ok' | 'failed'> = [];
      for (let i = 0; i < 12; i++) {
        results.push(
          await call(c).then(
            () => 'ok' as const,
            () => 'failed' as const,
          ),
        );
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(results.every((r) => r === 'ok')).toBe(true);
      // 1.2 s of calls over connections that live about 0.3 s each: several client ports.
      expect(new Set(a.peers).size).toBeGreaterThanOrEqual(3);
    } finally {
      c.close();
    }
  });
});

describe('gRPC configuration', () => {
  it('GRPC_MAX_CONNECTION_AGE_MS defaults to 5 minutes, takes 0 (off), refuses a negative value', () => {
    expect(loadConfig(grpcServerConfigShape, {}).GRPC_MAX_CONNECTION_AGE_MS).toBe(300_000);
    expect(loadConfig(grpcServerConfigShape, { GRPC_MAX_CONNECTION_AGE_MS: '0' })).toEqual({
      GRPC_MAX_CONNECTION_AGE_MS: 0,
    });
    expect(() => loadConfig(grpcServerConfigShape, { GRPC_MAX_CONNECTION_AGE_MS: '-1' })).toThrow(
      /GRPC_MAX_CONNECTION_AGE_MS/,
    );
  });

  it('a peer address is host:port or dns:///host:port, nothing else', () => {
    const shape = { PEER_ADDR: env.address('peer') };
    for (const ok of [
      'identity:50051',
      '10.0.0.7:50051',
      '[::1]:50051',
      'dns:///custos-identity-grpc:50051',
    ]) {
      expect(loadConfig(shape, { PEER_ADDR: ok }).PEER_ADDR).toBe(ok);
    }
    for (const bad of ['identity', 'dns://identity:50051', 'http://identity:50051', 'dns:///identity']) {
      expect(() => loadConfig(shape, { PEER_ADDR: bad })).toThrow(/PEER_ADDR/);
    }
  });
});
