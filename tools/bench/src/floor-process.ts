/**
 * One process of the hop floor (ceilings.ts `hopFloor`): the least a read through this mesh's shape
 * can cost — an HTTP edge, one mTLS gRPC hop, one Postgres point-select — with nothing of a real
 * read on top (no token, no limiter, no policy, no audit, no decryption).
 *
 *   node floor-process.js backend   → a gRPC server (mTLS, client certificate required) answering
 *                                     unary `Get` and a bidirectional `Pipe` with the row of
 *                                     `SELECT id, value FROM bench_point WHERE id = $1`
 *   node floor-process.js edge      → an HTTP server answering every request with that row as JSON,
 *                                     asked of the backend by a unary call per request
 *                                     (FLOOR_TRANSPORT=unary) or as one message on a long-lived
 *                                     bidirectional stream (FLOOR_TRANSPORT=stream)
 *
 * Settings come from the environment (FLOOR_*); the process prints `ready` on stdout once it
 * listens. Messages are raw bytes (no protobuf), which flatters both transports equally.
 */
import fs from 'node:fs';
import http from 'node:http';
import * as grpc from '@grpc/grpc-js';
import pg from 'pg';

const raw = (b: Buffer) => b;
const SERVICE = {
  get: {
    path: '/custos.bench.Floor/Get',
    requestStream: false,
    responseStream: false,
    requestSerialize: raw,
    requestDeserialize: raw,
    responseSerialize: raw,
    responseDeserialize: raw,
  },
  pipe: {
    path: '/custos.bench.Floor/Pipe',
    requestStream: true,
    responseStream: true,
    requestSerialize: raw,
    requestDeserialize: raw,
    responseSerialize: raw,
    responseDeserialize: raw,
  },
} satisfies grpc.ServiceDefinition;

const SELECT = { name: 'floor_point', text: 'SELECT id, value FROM bench_point WHERE id = $1' };
const ROWS = 10000;

function env(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
}

function backend(): void {
  const pool = new pg.Pool({ connectionString: env('FLOOR_DATABASE_URL'), max: Number(env('FLOOR_POOL')) });
  pool.on('error', () => undefined);
  const row = async (id: number) => Buffer.from(JSON.stringify((await pool.query(SELECT, [id])).rows[0]));
  const server = new grpc.Server();
  server.addService(SERVICE, {
    get: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      row(call.request.readUInt32BE(0)).then(
        (b) => cb(null, b),
        (e: Error) => cb({ code: grpc.status.UNAVAILABLE, details: e.message }),
      );
    },
    pipe: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
      call.on('data', (m: Buffer) => {
        const tag = m.readUInt32BE(0);
        row(m.readUInt32BE(4)).then(
          (b) => {
            const out = Buffer.allocUnsafe(4 + b.length);
            out.writeUInt32BE(tag, 0);
            b.copy(out, 4);
            call.write(out);
          },
          () => call.destroy(),
        );
      });
      call.on('end', () => call.end());
    },
  });
  const creds = grpc.ServerCredentials.createSsl(
    fs.readFileSync(env('FLOOR_CA_FILE')),
    [
      {
        private_key: fs.readFileSync(env('FLOOR_KEY_FILE')),
        cert_chain: fs.readFileSync(env('FLOOR_CERT_FILE')),
      },
    ],
    true,
  );
  server.bindAsync(`127.0.0.1:${env('FLOOR_GRPC_PORT')}`, creds, (err) => {
    if (err) throw err;
    process.stdout.write('ready\n');
  });
}

function edge(): void {
  const Client = grpc.makeGenericClientConstructor(SERVICE, 'Floor');
  const client = new Client(
    `localhost:${env('FLOOR_GRPC_PORT')}`,
    grpc.credentials.createSsl(
      fs.readFileSync(env('FLOOR_CA_FILE')),
      fs.readFileSync(env('FLOOR_KEY_FILE')),
      fs.readFileSync(env('FLOOR_CERT_FILE')),
    ),
  ) as unknown as {
    get(req: Buffer, cb: (err: grpc.ServiceError | null, res?: Buffer) => void): void;
    pipe(): grpc.ClientDuplexStream<Buffer, Buffer>;
  };
  const streamed = env('FLOOR_TRANSPORT') === 'stream';
  const waiting = new Map<number, (row: Buffer | undefined) => void>();
  let tag = 0;
  let stream: grpc.ClientDuplexStream<Buffer, Buffer> | undefined;
  if (streamed) {
    stream = client.pipe();
    stream.on('data', (m: Buffer) => {
      const t = m.readUInt32BE(0);
      const done = waiting.get(t);
      waiting.delete(t);
      done?.(m.subarray(4));
    });
    stream.on('error', () => {
      for (const done of waiting.values()) done(undefined);
      waiting.clear();
    });
  }
  const ask = (id: number, done: (row: Buffer | undefined) => void) => {
    if (stream) {
      tag = (tag + 1) >>> 0;
      const m = Buffer.allocUnsafe(8);
      m.writeUInt32BE(tag, 0);
      m.writeUInt32BE(id, 4);
      waiting.set(tag, done);
      stream.write(m);
      return;
    }
    const m = Buffer.allocUnsafe(4);
    m.writeUInt32BE(id, 0);
    client.get(m, (err, res) => done(err ? undefined : res));
  };
  http
    .createServer((req, res) => {
      req.resume();
      ask(1 + Math.floor(Math.random() * ROWS), (row) => {
        if (!row) {
          res.writeHead(503).end();
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': row.length });
        res.end(row);
      });
    })
    .listen(Number(env('FLOOR_HTTP_PORT')), '127.0.0.1', () => process.stdout.write('ready\n'));
}

if (process.argv[2] === 'backend') backend();
else if (process.argv[2] === 'edge') edge();
else throw new Error('usage: floor-process.js backend|edge');
