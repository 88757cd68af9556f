import dgram from 'node:dgram';
import net from 'node:net';
import { parseIp } from '@custos/service-kit';

const TYPE_A = 1;
const TYPE_AAAA = 28;
const CLASS_IN = 1;
const RCODE_NOERROR = 0;
const RCODE_FORMERR = 1;
const RCODE_NXDOMAIN = 3;
const RCODE_NOTIMP = 4;
const HEADER_BYTES = 12;

interface Question {
  /** Lower-case, without a trailing dot. */
  name: string;
  type: number;
  /** Offset just past the question in the query. */
  end: number;
}

/** The single question of a query; undefined when the query is malformed. */
function readQuestion(query: Buffer): Question | undefined {
  if (query.length < HEADER_BYTES || query.readUInt16BE(4) !== 1) return undefined;
  const labels: string[] = [];
  let i = HEADER_BYTES;
  for (;;) {
    const length = query[i++];
    // 64 and above are compression pointers, which a question never needs.
    if (length === undefined || length > 63 || i + length > query.length) return undefined;
    if (length === 0) break;
    labels.push(query.toString('latin1', i, i + length));
    i += length;
  }
  if (i + 4 > query.length) return undefined;
  return { name: labels.join('.').toLowerCase(), type: query.readUInt16BE(i), end: i + 4 };
}

/** The wire form of an address: 4 bytes for IPv4, 16 for IPv6 (IPv4-mapped kept as IPv6). */
function addressBytes(ip: string): Buffer | undefined {
  const parsed = parseIp(ip);
  if (!parsed) return undefined;
  if (parsed.family === 'ipv4' && net.isIPv6(ip)) {
    return Buffer.concat([Buffer.alloc(10), Buffer.from([0xff, 0xff]), parsed.bytes]);
  }
  return Buffer.from(parsed.bytes);
}

function answer(type: number, rdata: Buffer): Buffer {
  const rr = Buffer.alloc(12);
  rr.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's name
  rr.writeUInt16BE(type, 2);
  rr.writeUInt16BE(CLASS_IN, 4);
  rr.writeUInt32BE(0, 6); // TTL 0: nothing may cache an answer between two lookups
  rr.writeUInt16BE(rdata.length, 10);
  return Buffer.concat([rr, rdata]);
}

function reply(query: Buffer, question: Question | undefined, rcode: number, answers: Buffer[]): Buffer {
  const header = Buffer.alloc(HEADER_BYTES);
  header.writeUInt16BE(query.readUInt16BE(0), 0);
  // QR and AA set; opcode and RD echoed from the query.
  header[2] = 0x80 | (query[2]! & 0x78) | 0x04 | (query[2]! & 0x01);
  header[3] = rcode;
  header.writeUInt16BE(question ? 1 : 0, 4);
  header.writeUInt16BE(answers.length, 6);
  const echoed = question ? query.subarray(HEADER_BYTES, question.end) : Buffer.alloc(0);
  return Buffer.concat([header, echoed, ...answers]);
}

function respond(query: Buffer, records: Map<string, string[]>): Buffer | undefined {
  if (query.length < HEADER_BYTES || (query[2]! & 0x80) !== 0) return undefined; // not a query
  if ((query[2]! & 0x78) !== 0) return reply(query, undefined, RCODE_NOTIMP, []);
  const question = readQuestion(query);
  if (!question) return reply(query, undefined, RCODE_FORMERR, []);
  const addresses = records.get(question.name);
  if (!addresses) return reply(query, question, RCODE_NXDOMAIN, []);
  const wanted =
    question.type === TYPE_A ? net.isIPv4 : question.type === TYPE_AAAA ? net.isIPv6 : () => false;
  const answers = addresses
    .filter((ip) => wanted(ip))
    .flatMap((ip) => addressBytes(ip) ?? [])
    .map((rdata) => answer(question.type, rdata));
  return reply(query, question, RCODE_NOERROR, answers);
}

/**
 * A minimal UDP DNS server for tests on 127.0.0.1 at a free port. It answers A and AAAA queries from
 * `records` (lower-case name without trailing dot → IPv4/IPv6 addresses, read at every query so a
 * test can change them, e.g. to simulate DNS rebinding) with TTL 0, NOERROR without answers for a
 * known name that has none of the asked family, NXDOMAIN for an unknown name.
 */
export async function startDnsServer(): Promise<{
  port: number;
  records: Map<string, string[]>;
  close(): Promise<void>;
}> {
  const records = new Map<string, string[]>();
  const socket = dgram.createSocket('udp4');
  socket.on('message', (query, peer) => {
    const response = respond(query, records);
    if (response) socket.send(response, peer.port, peer.address);
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind({ address: '127.0.0.1', port: 0 }, () => {
      socket.off('error', reject);
      resolve();
    });
  });
  return {
    port: socket.address().port,
    records,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
