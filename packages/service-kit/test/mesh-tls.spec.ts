import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import {
  type Client,
  type ClientUnaryCall,
  ChannelCredentials,
  type ServiceError,
  Metadata,
  type ServiceDefinition,
  credentials,
  makeGenericClientConstructor,
  status,
} from '@grpc/grpc-js';
import { HealthClient } from '@custos/proto/grpc/health/v1/health';
import {
  type MeshCertFiles,
  createMeshCa,
  issueMeshCert,
  writeMeshCert,
  writeTestMeshCerts,
} from '@custos/testing';
import {
  GrpcServer,
  MESH_SERVICES,
  MeshTls,
  type MeshService,
  ServingStatus,
  callUnary,
  createGrpcClient,
  createLogger,
  createMetrics,
  currentRequestContext,
  runWithRequestContext,
  startMetricsServer,
} from '../src';
import { waitFor } from '../src/testing';

// A hand-written service (JSON on the wire): `whoAmI` echoes what the server believed about the
// call; `unwrapKey` stands for an internal RPC that only signer may call.
type Json = Record<string, unknown>;
const json = {
  requestStream: false,
  responseStream: false,
  requestSerialize: (v: Json) => Buffer.from(JSON.stringify(v)),
  requestDeserialize: (b: Buffer) => JSON.parse(b.toString()) as Json,
  responseSerialize: (v: Json) => Buffer.from(JSON.stringify(v)),
  responseDeserialize: (b: Buffer) => JSON.parse(b.toString()) as Json,
} as const;
const TestService = {
  whoAmI: { path: '/custos.test.v1.TestService/WhoAmI', ...json },
  unwrapKey: { path: '/custos.test.v1.TestService/UnwrapKey', ...json },
} satisfies ServiceDefinition;
type Unary = (
  r: Json,
  m: Metadata,
  o: object,
  cb: (e: ServiceError | null, r: Json) => void,
) => ClientUnaryCall;
type TestClient = Client & { whoAmI: Unary; unwrapKey: Unary };
const TestClientCtor = makeGenericClientConstructor(TestService, 'TestService') as unknown as new (
  address: string,
  creds: ChannelCredentials,
  options?: object,
) => TestClient;

const logger = createLogger({ service: 'mesh-tls-test', level: 'silent' });

describe('mTLS between mesh services', () => {
  let dir: string;
  let files: Record<string, MeshCertFiles>;
  const tlsOf = new Map<string, MeshTls>();
  let server: GrpcServer;
  let serverTls: MeshTls;
  let port: number;

  const meshTls = (service: string): MeshTls => {
    let t = tlsOf.get(service);
    if (!t) {
      t = new MeshTls(files[service]!, { refreshMs: 100 });
      tlsOf.set(service, t);
    }
    return t;
  };
  const clientAs = (caller: MeshService, peer: MeshService = 'vault-crypto') =>
    createGrpcClient(TestClientCtor, `127.0.0.1:${port}`, {
      tls: meshTls(caller),
      peer,
      deadlineMs: 3000,
      maxAttempts: 1,
    });
  const rawClient = (creds: ChannelCredentials) =>
    new TestClientCtor(`127.0.0.1:${port}`, creds, { 'grpc.enable_retries': 0 });
  const call = (c: TestClient, method: 'whoAmI' | 'unwrapKey', md = new Metadata()) =>
    callUnary(c, c[method], {}, md, { deadline: Date.now() + 3000 });
  const rawCode = (c: TestClient) =>
    new Promise<number | undefined>((resolve) =>
      c.whoAmI({}, new Metadata(), { deadline: Date.now() + 3000 }, (e) =>
        resolve((e as { code?: number } | null)?.code),
      ),
    );

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-mesh-tls-'));
    files = (await writeTestMeshCerts(dir, MESH_SERVICES)).files;
    serverTls = new MeshTls(files['vault-crypto']!, { refreshMs: 100, logger });
    server = new GrpcServer(logger, createMetrics('mesh-tls-test'), serverTls);
    server.add(
      TestService,
      {
        whoAmI: async () => ({ ...currentRequestContext() }),
        unwrapKey: async () => ({ unwrapped: true }),
      },
      { default: ['gateway', 'webhook-dispatcher'], methods: { unwrapKey: ['signer'] } },
    );
    port = await server.listen('127.0.0.1', 0);
    server.health.setAll(ServingStatus.SERVING);
  });
  afterAll(async () => {
    await server.shutdown(100);
    for (const t of tlsOf.values()) t.close();
    serverTls.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('answers a client that presents a mesh certificate and checks the server is who it meant', async () => {
    const c = clientAs('gateway');
    await expect(call(c, 'whoAmI')).resolves.toMatchObject({ caller: 'gateway' });
    c.close();
  });

  it('refuses a plaintext call', async () => {
    const c = rawClient(credentials.createInsecure());
    expect(await rawCode(c)).toBe(status.UNAVAILABLE);
    c.close();
  });

  it('refuses a TLS call without a client certificate', async () => {
    const c = rawClient(ChannelCredentials.createSsl(fs.readFileSync(files['gateway']!.caFile)));
    expect(await rawCode(c)).toBe(status.UNAVAILABLE);
    c.close();
  });

  it('refuses a client certificate from another CA, and a client that trusts another CA', async () => {
    const otherCa = await createMeshCa({ commonName: 'someone else' });
    const forged = await issueMeshCert(otherCa, 'gateway');
    const ca = fs.readFileSync(files['gateway']!.caFile);
    const c = rawClient(
      ChannelCredentials.createSsl(ca, Buffer.from(forged.keyPem), Buffer.from(forged.certPem), {
        checkServerIdentity: () => undefined,
      }),
    );
    expect(await rawCode(c)).toBe(status.UNAVAILABLE);
    c.close();
    const gw = files['gateway']!;
    const trustsOther = rawClient(
      ChannelCredentials.createSsl(
        Buffer.from(otherCa.certPem),
        fs.readFileSync(gw.keyFile),
        fs.readFileSync(gw.certFile),
        { checkServerIdentity: () => undefined },
      ),
    );
    expect(await rawCode(trustsOther)).toBe(status.UNAVAILABLE);
    trustsOther.close();
  });

  it('refuses to talk to a server whose certificate names another service', async () => {
    // The server is vault-crypto; this client meant to reach policy at that address.
    const c = clientAs('gateway', 'policy');
    await expect(call(c, 'whoAmI')).rejects.toMatchObject({ kind: 'unavailable' });
    c.close();
  });

  it('answers PERMISSION_DENIED to a caller the RPC does not allow, and logs who and what', async () => {
    const lines: string[] = [];
    const s = new GrpcServer(
      createLogger({ service: 'x', level: 'warn', destination: { write: (l: string) => lines.push(l) } }),
      createMetrics('mesh-tls-test-2'),
      serverTls,
    );
    s.add(TestService, { whoAmI: async () => ({}), unwrapKey: async () => ({}) }, { default: ['gateway'] });
    const p = await s.listen('127.0.0.1', 0);
    s.health.setAll(ServingStatus.SERVING);
    const c = createGrpcClient(TestClientCtor, `127.0.0.1:${p}`, {
      tls: meshTls('billing'),
      peer: 'vault-crypto',
    });
    const raw = await new Promise<{ code?: number; details?: string }>((resolve) =>
      c.whoAmI({}, new Metadata(), {}, (e) => resolve(e ?? {})),
    );
    expect(raw.code).toBe(status.PERMISSION_DENIED);
    const log = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l['caller']);
    expect(log).toMatchObject({ caller: 'billing', method: '/custos.test.v1.TestService/WhoAmI' });
    c.close();
    await s.shutdown(100);
  });

  it('lets only signer call a signer-only RPC', async () => {
    const signer = clientAs('signer');
    await expect(call(signer, 'unwrapKey')).resolves.toEqual({ unwrapped: true });
    // Signer is not on the default list: the per-method list is the whole list.
    await expect(call(signer, 'whoAmI')).rejects.toMatchObject({ kind: 'permission_denied' });
    const hook = clientAs('webhook-dispatcher');
    await expect(call(hook, 'unwrapKey')).rejects.toMatchObject({ kind: 'permission_denied' });
    const gateway = clientAs('gateway');
    await expect(call(gateway, 'unwrapKey')).rejects.toMatchObject({ kind: 'permission_denied' });
    for (const c of [signer, hook, gateway]) c.close();
  });

  it('reads each connection’s client certificate once, and tells concurrent callers on their own connections apart', async () => {
    const read = jest.spyOn(tls.TLSSocket.prototype, 'getPeerCertificate');
    try {
      const gateway = clientAs('gateway');
      const hook = clientAs('webhook-dispatcher');
      const signer = clientAs('signer');
      const [g, h, s] = await Promise.all([
        Promise.all(Array.from({ length: 10 }, () => call(gateway, 'whoAmI'))),
        Promise.all(Array.from({ length: 10 }, () => call(hook, 'whoAmI'))),
        Promise.all(Array.from({ length: 10 }, () => call(signer, 'whoAmI').catch((e: unknown) => e))),
      ]);
      expect(g.map((r) => r['caller'])).toEqual(Array(10).fill('gateway'));
      expect(h.map((r) => r['caller'])).toEqual(Array(10).fill('webhook-dispatcher'));
      // Signer may not call whoAmI: its identity, remembered for its connection, is refused every time.
      expect(s).toEqual(Array(10).fill(expect.objectContaining({ kind: 'permission_denied' })));
      // Thirty calls on three connections: the server read three client certificates (the
      // clients check the server's once each as they connect, which also goes through this method).
      const serverReads = read.mock.contexts.filter((socket) => (socket as tls.TLSSocket).server);
      expect(serverReads).toHaveLength(3);
      for (const c of [gateway, hook, signer]) c.close();
    } finally {
      read.mockRestore();
    }
  });

  it('answers health to any mesh certificate', async () => {
    const h = createGrpcClient(HealthClient, `127.0.0.1:${port}`, {
      tls: meshTls('billing'),
      peer: 'vault-crypto',
    });
    const r = await callUnary(h, h.check, { service: '' }, new Metadata());
    expect(r.status).toBe(ServingStatus.SERVING);
    h.close();
  });

  it('believes the JWT and client IP from the gateway only; request id travels from anyone', async () => {
    const spoof = () => {
      const md = new Metadata();
      md.set('authorization', 'Bearer relayed');
      md.set('x-custos-client-ip', '10.9.9.9');
      md.set('x-request-id', 'req-1');
      return md;
    };
    const hook = clientAs('webhook-dispatcher');
    expect(await call(hook, 'whoAmI', spoof())).toEqual({ requestId: 'req-1', caller: 'webhook-dispatcher' });
    const gateway = clientAs('gateway');
    expect(await call(gateway, 'whoAmI', spoof())).toEqual({
      requestId: 'req-1',
      caller: 'gateway',
      authorization: 'Bearer relayed',
      clientIp: '10.9.9.9',
    });
    hook.close();
    gateway.close();
  });

  it("forwards the caller's JWT and IP only from clients made with forwardCaller", async () => {
    const ctx = { requestId: 'req-2', authorization: 'Bearer user', clientIp: '192.0.2.7' };
    const plain = clientAs('gateway');
    expect(await runWithRequestContext(ctx, () => call(plain, 'whoAmI'))).toEqual({
      requestId: 'req-2',
      caller: 'gateway',
    });
    const edge = createGrpcClient(TestClientCtor, `127.0.0.1:${port}`, {
      tls: meshTls('gateway'),
      peer: 'vault-crypto',
      forwardCaller: true,
    });
    expect(await runWithRequestContext(ctx, () => call(edge, 'whoAmI'))).toEqual({
      ...ctx,
      caller: 'gateway',
    });
    plain.close();
    edge.close();
  });

  it('sends the token callerToken resolves for the peer, and ends the call at its deadline or cancel while it waits', async () => {
    const ctx = { requestId: 'req-3', authorization: 'Bearer user' };
    const clientWith = (source: (peer: string, auth: string) => Promise<string | undefined>) =>
      createGrpcClient(TestClientCtor, `127.0.0.1:${port}`, {
        tls: meshTls('gateway'),
        peer: 'vault-crypto',
        forwardCaller: true,
        callerToken: source,
      });
    const swapped = clientWith(async (peer, auth) => `for-${peer}-of-${auth.split(' ')[1]}`);
    expect(await runWithRequestContext(ctx, () => call(swapped, 'whoAmI'))).toMatchObject({
      authorization: 'Bearer for-vault-crypto-of-user',
    });
    // A source slower than the deadline: the call ends with DEADLINE_EXCEEDED, not never.
    const slow = clientWith(() => new Promise((r) => setTimeout(() => r('late'), 800)));
    const started = Date.now();
    const code = await runWithRequestContext(
      ctx,
      () =>
        new Promise<number | undefined>((resolve) =>
          slow.whoAmI({}, new Metadata(), { deadline: Date.now() + 200 }, (e) =>
            resolve((e as { code?: number } | null)?.code),
          ),
        ),
    );
    expect(code).toBe(4); // DEADLINE_EXCEEDED
    expect(Date.now() - started).toBeLessThan(700);
    // Cancelled by its caller while it waits: the callback still runs, with CANCELLED.
    const cancelled = await runWithRequestContext(
      ctx,
      () =>
        new Promise<number | undefined>((resolve) => {
          const c = slow.whoAmI({}, new Metadata(), { deadline: Date.now() + 3000 }, (e) =>
            resolve((e as { code?: number } | null)?.code),
          );
          setTimeout(() => c.cancel(), 50);
        }),
    );
    expect(cancelled).toBe(1); // CANCELLED
    swapped.close();
    slow.close();
  });

  it('rejects an access list that names a method the service does not have', () => {
    const s = new GrpcServer(logger, createMetrics('mesh-tls-test-3'), serverTls);
    expect(() =>
      s.add(
        TestService,
        { whoAmI: async () => ({}), unwrapKey: async () => ({}) },
        { default: [], methods: { unwrapKeys: ['signer'] } as never },
      ),
    ).toThrow(/unwrapKeys/);
  });
});

describe('certificate rotation without a restart', () => {
  let dir: string;
  let files: Record<string, MeshCertFiles>;
  let ca: Awaited<ReturnType<typeof createMeshCa>>;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-mesh-rotate-'));
    ({ ca, files } = await writeTestMeshCerts(dir, ['vault-crypto', 'gateway']));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** The serial of the certificate a TLS server presents to a new connection. */
  const serverSerial = (port: number, client: MeshCertFiles) =>
    new Promise<string>((resolve, reject) => {
      const s = tls.connect({
        host: '127.0.0.1',
        port,
        ca: fs.readFileSync(client.caFile),
        cert: fs.readFileSync(client.certFile),
        key: fs.readFileSync(client.keyFile),
        ALPNProtocols: ['h2'],
        checkServerIdentity: () => undefined,
      });
      s.once('secureConnect', () => {
        resolve(s.getPeerCertificate().serialNumber);
        s.destroy();
      });
      s.once('error', reject);
    });

  it('serves a renewed certificate and presents a renewed client certificate to new connections', async () => {
    const serverTls = new MeshTls(files['vault-crypto']!, { refreshMs: 100, logger });
    const clientTls = new MeshTls(files['gateway']!, { refreshMs: 100, logger });
    const server = new GrpcServer(logger, createMetrics('rotate-test'), serverTls);
    server.add(
      TestService,
      {
        whoAmI: async (_req: unknown, c: ServerUnaryCall<unknown, unknown>) => ({
          serial: c.getAuthContext().sslPeerCertificate?.serialNumber,
        }),
        unwrapKey: async () => ({}),
      },
      { default: ['gateway'] },
    );
    const port = await server.listen('127.0.0.1', 0);
    const oldServerSerial = serverTls.certificate.serialNumber;
    const oldClientSerial = clientTls.certificate.serialNumber;
    expect(await serverSerial(port, files['gateway']!)).toBe(oldServerSerial);
    const first = createGrpcClient(TestClientCtor, `127.0.0.1:${port}`, {
      tls: clientTls,
      peer: 'vault-crypto',
    });
    expect(await callUnary(first, first.whoAmI, {}, new Metadata())).toEqual({ serial: oldClientSerial });
    first.close();

    // Renew both: new keys, new serials, a later validity; the same paths, written in place.
    const renewedServer = await issueMeshCert(ca, 'vault-crypto', { validDays: 1, notBefore: new Date() });
    const renewedClient = await issueMeshCert(ca, 'gateway', { validDays: 1, notBefore: new Date() });
    writeMeshCert(dir, 'vault-crypto', renewedServer);
    writeMeshCert(dir, 'gateway', renewedClient);

    await waitFor(
      async () => (await serverSerial(port, files['gateway']!)) === renewedServer.serialNumber,
      5000,
    );
    await waitFor(async () => clientTls.certificate.serialNumber === renewedClient.serialNumber, 5000);
    const second = createGrpcClient(TestClientCtor, `127.0.0.1:${port}`, {
      tls: clientTls,
      peer: 'vault-crypto',
    });
    expect(await callUnary(second, second.whoAmI, {}, new Metadata())).toEqual({
      serial: renewedClient.serialNumber,
    });
    second.close();
    await server.shutdown(100);
    serverTls.close();
    clientTls.close();
  });

  it('keeps the current certificate when the files on disk do not fit together', async () => {
    const t = new MeshTls(files['gateway']!, { refreshMs: 60_000 });
    const before = t.certificate.serialNumber;
    // A certificate without its key (the key of another service).
    const other = await issueMeshCert(ca, 'gateway');
    fs.writeFileSync(files['gateway']!.certFile, other.certPem);
    expect(t.reload()).toBe(false);
    expect(t.certificate.serialNumber).toBe(before);
    // Once the key arrives too, it switches.
    fs.writeFileSync(files['gateway']!.keyFile, other.keyPem);
    expect(t.reload()).toBe(true);
    expect(t.certificate.serialNumber).toBe(other.serialNumber);
    t.close();
  });

  it('refuses files that make another identity, at start and on reload', async () => {
    const t = new MeshTls(files['gateway']!, { refreshMs: 60_000 });
    writeMeshCert(dir, 'gateway', await issueMeshCert(ca, 'billing'));
    expect(t.reload()).toBe(false);
    expect(t.identity).toBe('gateway');
    t.close();
    expect(() => new MeshTls({ ...files['gateway']!, caFile: path.join(dir, 'missing.crt') })).toThrow(
      /GRPC_TLS_CA_FILE/,
    );
  });
  it('keeps the current certificate instead of an expired one, or one that chains only to a certificate in its own file', async () => {
    const t = new MeshTls(files['gateway']!, { refreshMs: 60_000 });
    const before = t.certificate.serialNumber;
    // Expired a day ago (issued 31 days ago for 30 days).
    writeMeshCert(
      dir,
      'gateway',
      await issueMeshCert(ca, 'gateway', {
        notBefore: new Date(Date.now() - 31 * 86_400_000),
        validDays: 29,
      }),
    );
    expect(t.reload()).toBe(false);
    expect(t.certificate.serialNumber).toBe(before);
    // Signed by another "CA" whose certificate rides along in the cert file (not the mesh CA).
    const rogue = await createMeshCa({ commonName: 'rogue' });
    const forged = await issueMeshCert(rogue, 'gateway');
    writeMeshCert(dir, 'gateway', { ...forged, certPem: forged.certPem + rogue.certPem });
    expect(t.reload()).toBe(false);
    expect(t.certificate.serialNumber).toBe(before);
    t.close();
  });
});

describe('probes on the metrics port', () => {
  it('answers /livez always and /readyz only while ready', async () => {
    let ready = false;
    const m = createMetrics('probe-test');
    const srv = await startMetricsServer(m.registry, '127.0.0.1', 0, { ready: () => ready });
    const get = async (p: string) => (await fetch(`http://127.0.0.1:${srv.port}${p}`)).status;
    expect(await get('/livez')).toBe(200);
    expect(await get('/readyz')).toBe(503);
    ready = true;
    expect(await get('/readyz')).toBe(200);
    await srv.close();
  });
});
