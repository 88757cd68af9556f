// Scale-out over gRPC: a client spreads its calls over every address its target resolves to
// (round_robin), and a server's GRPC_MAX_CONNECTION_AGE_MS makes clients reconnect (and so
// re-resolve and find new pods) without failing a call. Real servers, real mTLS, real sockets.
import { type ChildProcess, spawn } from 'node:child_process';
import dgram from 'node:dgram';
import dns from 'node:dns';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Metadata, type ServerUnaryCall, status as GrpcStatus } from '@grpc/grpc-js';
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
  describeConfig,
  env,
  grpcServerConfigShape,
  loadConfig,
} from '../src';
// grpc-js's own target parsing (no public API): the address refusals are checked against it.
import { mapUriDefaultScheme } from '@grpc/grpc-js/build/src/resolver';
import { parseUri } from '@grpc/grpc-js/build/src/uri-parser';
import { freePort } from '../src/testing';

const logger = createLogger({ service: 'grpc-balancing-test', level: 'silent' });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A DNS server on 127.0.0.1 that answers every TXT question with `txt` (split in 255-byte strings)
 * and every other question with no answer; it records the questions (`<type> <name>`).
 */
async function startTxtDnsServer(txt: string) {
  const questions: string[] = [];
  const socket = dgram.createSocket('udp4');
  socket.on('message', (msg, from) => {
    let at = 12;
    const labels: string[] = [];
    while (msg[at]! !== 0) {
      labels.push(msg.subarray(at + 1, at + 1 + msg[at]!).toString('latin1'));
      at += msg[at]! + 1;
    }
    const type = msg.readUInt16BE(at + 1);
    const questionEnd = at + 5;
    questions.push(`${type === 16 ? 'TXT' : type} ${labels.join('.')}`);
    const strings: Buffer[] = [];
    const text = Buffer.from(txt);
    for (let i = 0; i < text.length; i += 255) {
      const part = text.subarray(i, i + 255);
      strings.push(Buffer.from([part.length]), part);
    }
    const rdata = Buffer.concat(strings);
    const answer =
      type === 16
        ? Buffer.concat([
            // name: a pointer to the question's; type TXT, class IN, TTL 0, then the data
            Buffer.from([0xc0, 0x0c, 0, 16, 0, 1, 0, 0, 0, 0, rdata.length >> 8, rdata.length & 0xff]),
            rdata,
          ])
        : Buffer.alloc(0);
    const header = Buffer.alloc(12);
    msg.copy(header, 0, 0, 2); // the question's id
    header.writeUInt16BE(0x8180, 2); // a response, recursion desired and available, no error
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(type === 16 ? 1 : 0, 6);
    socket.send(Buffer.concat([header, msg.subarray(12, questionEnd), answer]), from.port, from.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${socket.address().port}`,
    questions,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}

/**
 * test/fixtures/echo-peer-service.cjs as its own process: a vault-crypto started by runService with
 * `env` over the mesh files, answering GetKmsHealth with the caller's address. Resolves once ready.
 */
async function startEchoService(
  tlsFiles: { caFile: string; certFile: string; keyFile: string },
  env: NodeJS.ProcessEnv,
) {
  const child: ChildProcess = spawn(
    process.execPath,
    [path.join(__dirname, 'fixtures/echo-peer-service.cjs')],
    {
      env: {
        PATH: process.env['PATH'],
        LOG_LEVEL: 'info',
        GRPC_HOST: '127.0.0.1',
        GRPC_PORT: '0',
        METRICS_HOST: '127.0.0.1',
        METRICS_PORT: '0',
        GRPC_TLS_CA_FILE: tlsFiles.caFile,
        GRPC_TLS_CERT_FILE: tlsFiles.certFile,
        GRPC_TLS_KEY_FILE: tlsFiles.keyFile,
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the service did not start:\n${output}`)), 20_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const ready = output.split('\n').find((l) => l.includes('"msg":"ready"'));
      if (ready) {
        clearTimeout(timer);
        resolve((JSON.parse(ready) as { grpc_port: number }).grpc_port);
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the service exited with ${code}:\n${output}`));
    });
  });
  const stop = async () => {
    if (child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  };
  return { port, stop };
}

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
  let policyTls: MeshTls;
  let files: Awaited<ReturnType<typeof writeTestMeshCerts>>['files'];
  const servers: GrpcServer[] = [];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-grpc-balancing-'));
    ({ files } = await writeTestMeshCerts(dir, ['vault-crypto', 'gateway', 'policy']));
    serverTls = new MeshTls(files['vault-crypto']!);
    gatewayTls = new MeshTls(files['gateway']!);
    policyTls = new MeshTls(files['policy']!);
  });
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.shutdown(100)));
  });
  afterAll(() => {
    serverTls.close();
    gatewayTls.close();
    policyTls.close();
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

  it("refuses a server presenting another service's mesh certificate over a dns:/// target: its handler never runs", async () => {
    const port = await freePort();
    // A server on the address the client resolves, with a valid mesh certificate, but policy's.
    const impostor = await startServer(policyTls, '127.0.0.1', port);
    servers.push(impostor.server);
    const c = clientOf(`dns:///localhost:${port}`);
    try {
      // The TLS handshake fails the client's identity check: the call never reaches the server.
      await expect(call(c)).rejects.toMatchObject({ kind: 'unavailable' });
      expect(impostor.peers).toEqual([]);
    } finally {
      c.close();
    }
    // The same server and target with the client expecting 'policy': the refusal was the name.
    const right = createGrpcClient(VaultCryptoServiceClient, `dns:///localhost:${port}`, {
      tls: gatewayTls,
      peer: 'policy',
      deadlineMs: 2000,
    });
    try {
      await expect(call(right)).resolves.toMatchObject({ healthy: true });
      expect(impostor.peers).toHaveLength(1);
    } finally {
      right.close();
    }
  });

  it('ignores a service config published in DNS: a grpc_config TXT record never reaches its calls', async () => {
    const port = await freePort();
    const a = await startServer(serverTls, '127.0.0.1', port);
    servers.push(a.server);
    // The record a DNS attacker would publish: every call gets a deadline of a microsecond.
    const record = `grpc_config=${JSON.stringify([
      { serviceConfig: { methodConfig: [{ name: [{}], timeout: '0.000001s' }] } },
    ])}`;
    const dnsServer = await startTxtDnsServer(record);
    const servers0 = dns.promises.getServers();
    dns.promises.setServers([dnsServer.address]);
    try {
      const ours = clientOf(`dns:///localhost:${port}`);
      try {
        for (let i = 0; i < 10; i++) {
          await expect(call(ours)).resolves.toMatchObject({ healthy: true });
          await sleep(50);
        }
      } finally {
        ours.close();
      }
      expect(dnsServer.questions.filter((q) => q.startsWith('TXT'))).toEqual([]);
      // The record is real and grpc-js applies it: a client without the option asks for it, and
      // its calls then end at the record's deadline. It is otherwise the same channel.
      const plain = new VaultCryptoServiceClient(
        `dns:///localhost:${port}`,
        gatewayTls.channelCredentials('vault-crypto'),
        {
          'grpc.ssl_target_name_override': 'vault-crypto',
          'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }),
        },
      );
      try {
        let cut: { code?: number } | undefined;
        for (let i = 0; i < 40 && !cut; i++) {
          cut = await new Promise<{ code?: number } | undefined>((resolve) =>
            plain.getKmsHealth({}, new Metadata(), { deadline: Date.now() + 2000 }, (err) =>
              resolve(err ?? undefined),
            ),
          );
          if (!cut) await sleep(50);
        }
        expect(dnsServer.questions).toContain('TXT localhost');
        expect(cut?.code).toBe(GrpcStatus.DEADLINE_EXCEEDED);
      } finally {
        plain.close();
      }
    } finally {
      dns.promises.setServers(servers0);
      await dnsServer.close();
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

  it('a call outliving the grace is cut and run again by the retry policy: the handler runs twice', async () => {
    // What GrpcServerOptions.maxConnectionAgeGraceMs warns about: fine for idempotent RPCs under
    // a 5 s deadline, not for a long RPC that must not run twice.
    const server = new GrpcServer(logger, createMetrics('balancing-grace'), serverTls, {
      maxConnectionAgeMs: 200,
      maxConnectionAgeGraceMs: 300,
    });
    servers.push(server);
    let runs = 0;
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
        getKmsHealth: async () => {
          runs += 1;
          // The first run outlives connection age + grace (about 0.5 s); a retry answers at once.
          if (runs === 1) await sleep(1500);
          return { provider: `run ${runs}`, healthy: true, detail: '', latencyMs: 0 };
        },
      },
      { default: ['gateway'] },
    );
    const port = await server.listen('127.0.0.1', 0);
    server.health.setAll(ServingStatus.SERVING);
    const c = clientOf(`127.0.0.1:${port}`);
    try {
      await expect(call(c)).resolves.toMatchObject({ provider: 'run 2' });
      expect(runs).toBe(2);
    } finally {
      c.close();
    }
  });
});

describe('a service started by runService', () => {
  // The whole start path of a service (runtime.ts), not a GrpcServer built by hand: the setting
  // is read from the environment and reaches the server the service listens with.
  let dir: string;
  let files: Awaited<ReturnType<typeof writeTestMeshCerts>>['files'];
  let gatewayTls: MeshTls;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-grpc-runtime-'));
    ({ files } = await writeTestMeshCerts(dir, ['vault-crypto', 'gateway']));
    gatewayTls = new MeshTls(files['gateway']!);
  });
  afterAll(() => {
    gatewayTls.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** The client address each of 12 calls, 100 ms apart, arrived from (as the service saw it). */
  async function callerPorts(port: number): Promise<string[]> {
    const c = createGrpcClient(VaultCryptoServiceClient, `dns:///localhost:${port}`, {
      tls: gatewayTls,
      peer: 'vault-crypto',
      deadlineMs: 2000,
    });
    try {
      const seen: string[] = [];
      for (let i = 0; i < 12; i++) {
        seen.push((await callUnary(c, c.getKmsHealth, {}, new Metadata())).provider);
        await sleep(100);
      }
      return seen;
    } finally {
      c.close();
    }
  }

  it('applies GRPC_MAX_CONNECTION_AGE_MS: a small age makes the client reconnect, the default keeps one connection', async () => {
    const aged = await startEchoService(files['vault-crypto']!, { GRPC_MAX_CONNECTION_AGE_MS: '300' });
    try {
      expect(new Set(await callerPorts(aged.port)).size).toBeGreaterThanOrEqual(3);
    } finally {
      await aged.stop();
    }
    const lasting = await startEchoService(files['vault-crypto']!, {});
    try {
      expect(new Set(await callerPorts(lasting.port)).size).toBe(1);
    } finally {
      await lasting.stop();
    }
  }, 60_000);
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

  it('refuses a host that gRPC would read as a scheme, and only those', () => {
    const shape = { PEER_ADDR: env.address('peer') };
    // What grpc-js itself makes of a target: the resolver (scheme) and what that resolver reads.
    const readAs = (target: string) => {
      const uri = mapUriDefaultScheme(parseUri(target)!)!;
      return `${uri.scheme} ${uri.path}`;
    };
    for (const bad of ['unix:50051', 'ipv4:50051', 'ipv6:50051', 'dns:50051']) {
      // Not "DNS, host:port": a socket file, an address list, or the DNS name "50051".
      expect(readAs(bad)).toBe(`${bad.split(':')[0]} 50051`);
      expect(() => loadConfig(shape, { PEER_ADDR: bad })).toThrow(/PEER_ADDR: .*read by gRPC as a scheme/);
    }
    expect(() => loadConfig(shape, { PEER_ADDR: 'UNIX:50051' })).toThrow(/PEER_ADDR/);
    // Everything accepted is a host:port for the DNS resolver, with or without dns:///.
    for (const ok of [
      'identity:50051',
      'unix.example:50051',
      'dns-1:50051',
      '10.0.0.7:50051',
      '[::1]:50051',
    ]) {
      expect(loadConfig(shape, { PEER_ADDR: ok }).PEER_ADDR).toBe(ok);
      expect(readAs(ok)).toBe(`dns ${ok}`);
    }
    expect(loadConfig(shape, { PEER_ADDR: 'dns:///unix:50051' }).PEER_ADDR).toBe('dns:///unix:50051');
    expect(readAs('dns:///unix:50051')).toBe('dns unix:50051');
    expect(describeConfig(shape)[0]!.description).toMatch(
      /^peer Also `dns:\/\/\/host:port`; either form is resolved through DNS/,
    );
  });
});
