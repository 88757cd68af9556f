/**
 * A minimal writer of MaxMind DB files (the format the `maxmind` reader opens), for tests only:
 * an IPv4 database (ip_version 4, 24-bit records) mapping networks to GeoIP2-Country-shaped
 * records `{country: {iso_code}}`. It follows the published MaxMind DB File Format Specification
 * 2.0 (search tree, 16-byte data-section separator, data section, metadata after
 * `\xAB\xCD\xEFMaxMind.com`); no npm package writes the format, and the reader under test is the
 * check that the file is right.
 */

type Value = string | number | bigint | Value[] | { [k: string]: Value };

/** Control byte(s) of a field of `type` (1-15) and `size`. */
function control(type: number, size: number): Buffer {
  const head: number[] = [];
  let sizeBits: number;
  const extra: number[] = [];
  if (size < 29) sizeBits = size;
  else if (size < 29 + 256) {
    sizeBits = 29;
    extra.push(size - 29);
  } else {
    sizeBits = 30;
    const v = size - 285;
    extra.push((v >> 8) & 0xff, v & 0xff);
  }
  if (type <= 7) head.push((type << 5) | sizeBits);
  else head.push(sizeBits, type - 7);
  return Buffer.from([...head, ...extra]);
}

function uintBytes(v: bigint): Buffer {
  const out: number[] = [];
  while (v > 0n) {
    out.unshift(Number(v & 0xffn));
    v >>= 8n;
  }
  return Buffer.from(out);
}

/** Encodes a value: strings (utf8), maps, arrays, numbers as uint32, bigints as uint64. */
export function encode(v: Value): Buffer {
  if (typeof v === 'string') {
    const b = Buffer.from(v, 'utf8');
    return Buffer.concat([control(2, b.length), b]);
  }
  if (typeof v === 'number') {
    const b = uintBytes(BigInt(v));
    return Buffer.concat([control(v <= 0xffff ? 5 : 6, b.length), b]);
  }
  if (typeof v === 'bigint') {
    const b = uintBytes(v);
    return Buffer.concat([control(9, b.length), b]);
  }
  if (Array.isArray(v)) return Buffer.concat([control(11, v.length), ...v.map(encode)]);
  const entries = Object.entries(v);
  return Buffer.concat([control(7, entries.length), ...entries.flatMap(([k, x]) => [encode(k), encode(x)])]);
}

interface Node {
  kids: [Node | number | undefined, Node | number | undefined];
}

function ipv4Bits(ip: string): number[] {
  const n = ip.split('.').map(Number);
  const bits: number[] = [];
  for (const byte of n) for (let i = 7; i >= 0; i--) bits.push((byte >> i) & 1);
  return bits;
}

/**
 * An IPv4 MaxMind DB mapping each `network` (`a.b.c.d/len`) to `{country: {iso_code: region}}`
 * (more specific networks must not overlap less specific ones here; tests give disjoint ones);
 * `buildEpoch` fixed makes the file reproducible (the e2e fixture is checked against it).
 */
export function countryMmdb(
  networks: Record<string, string>,
  buildEpoch = Math.floor(Date.now() / 1000),
): Buffer {
  // Data section: one record per distinct region.
  const offsets = new Map<string, number>();
  const chunks: Buffer[] = [];
  let size = 0;
  for (const region of new Set(Object.values(networks))) {
    offsets.set(region, size);
    const b = encode({ country: { iso_code: region } });
    chunks.push(b);
    size += b.length;
  }
  const data = Buffer.concat(chunks);
  // The tree: a trie over the address bits; a leaf holds the data offset (as -1 - offset).
  const root: Node = { kids: [undefined, undefined] };
  for (const [net, region] of Object.entries(networks)) {
    const [ip = '', lenText = '32'] = net.split('/');
    const bits = ipv4Bits(ip).slice(0, Number(lenText));
    let node = root;
    bits.forEach((bit, i) => {
      if (i === bits.length - 1) {
        node.kids[bit as 0 | 1] = -1 - offsets.get(region)!;
        return;
      }
      let next = node.kids[bit as 0 | 1];
      if (typeof next !== 'object') node.kids[bit as 0 | 1] = next = { kids: [undefined, undefined] };
      node = next;
    });
  }
  const order: Node[] = [];
  const queue: Node[] = [root];
  while (queue.length > 0) {
    const n = queue.shift()!;
    order.push(n);
    for (const k of n.kids) if (typeof k === 'object') queue.push(k);
  }
  const index = new Map(order.map((n, i) => [n, i]));
  const nodeCount = order.length;
  const tree = Buffer.alloc(nodeCount * 6);
  const record = (k: Node | number | undefined): number =>
    k === undefined ? nodeCount : typeof k === 'object' ? index.get(k)! : nodeCount + 16 + (-1 - k);
  order.forEach((n, i) => {
    tree.writeUIntBE(record(n.kids[0]), i * 6, 3);
    tree.writeUIntBE(record(n.kids[1]), i * 6 + 3, 3);
  });
  const metadata = encode({
    binary_format_major_version: 2,
    binary_format_minor_version: 0,
    build_epoch: BigInt(buildEpoch),
    database_type: 'Custos-Test-Country',
    description: { en: 'test fixture' },
    ip_version: 4,
    languages: ['en'],
    node_count: nodeCount,
    record_size: 24,
  });
  return Buffer.concat([
    tree,
    Buffer.alloc(16),
    data,
    Buffer.from([0xab, 0xcd, 0xef]),
    Buffer.from('MaxMind.com', 'ascii'),
    metadata,
  ]);
}
