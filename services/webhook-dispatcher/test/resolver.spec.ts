import path from 'node:path';
import { createResolver } from '../src/delivery/destination.js';

/** What tools/e2e/src/dns-server.ts returns. */
interface DnsServer {
  port: number;
  records: Map<string, string[]>;
  close(): Promise<void>;
}

// The test DNS server belongs to tools/e2e. It is loaded by path at run time because a static
// import would put another package's file inside this tsconfig's rootDir (TS6059).
const DNS_SERVER_MODULE = path.resolve(__dirname, '../../../tools/e2e/src/dns-server');

describe('createResolver with explicit servers', () => {
  let dns: DnsServer;
  let resolve: (host: string) => Promise<string[]>;

  beforeAll(async () => {
    const { startDnsServer } = (await import(DNS_SERVER_MODULE)) as {
      startDnsServer: () => Promise<DnsServer>;
    };
    dns = await startDnsServer();
    resolve = createResolver([`127.0.0.1:${dns.port}`]);
  });

  afterAll(async () => {
    await dns.close();
  });

  it('returns the A and AAAA records of a name', async () => {
    dns.records.set('hooks.example.test', ['93.184.216.34', '2606:4700::1111']);
    expect((await resolve('hooks.example.test')).sort()).toEqual(['2606:4700::1111', '93.184.216.34']);
  });

  it('is fine with one family having no records', async () => {
    dns.records.set('v4only.example.test', ['93.184.216.34', '93.184.216.35']);
    expect(await resolve('v4only.example.test')).toEqual(['93.184.216.34', '93.184.216.35']);
    dns.records.set('v6only.example.test', ['::ffff:127.0.0.1']);
    expect(await resolve('v6only.example.test')).toEqual(['::ffff:127.0.0.1']);
  });

  it('throws for an unknown name', async () => {
    await expect(resolve('unknown.example.test')).rejects.toMatchObject({ code: 'ENOTFOUND' });
  });

  it('throws for a known name without addresses', async () => {
    dns.records.set('empty.example.test', []);
    await expect(resolve('empty.example.test')).rejects.toMatchObject({ code: 'ENODATA' });
  });

  it('sees every change of a record (TTL 0), as DNS rebinding would', async () => {
    dns.records.set('rebind.example.test', ['93.184.216.34']);
    expect(await resolve('rebind.example.test')).toEqual(['93.184.216.34']);
    dns.records.set('rebind.example.test', ['127.0.0.1']);
    expect(await resolve('rebind.example.test')).toEqual(['127.0.0.1']);
  });
});

describe('createResolver with the system resolver (no WEBHOOK_DNS_SERVERS)', () => {
  const resolve = createResolver([]);

  it('resolves through getaddrinfo, /etc/hosts included, and the result is then judged like any other', async () => {
    const addresses = await resolve('localhost');
    expect(addresses.length).toBeGreaterThan(0);
    expect(addresses.every((a) => a === '127.0.0.1' || a === '::1' || a.startsWith('127.'))).toBe(true);
  });

  it('fails for a name that does not exist', async () => {
    await expect(resolve('no-such-host.invalid')).rejects.toBeDefined();
  });
});
