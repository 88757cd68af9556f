import { parseNetwork, type Network } from '@custos/service-kit';
import {
  DestinationRefusedError,
  blockedReason,
  checkUrl,
  resolveDestination,
  type DestinationPolicy,
} from './destination.js';

const PUBLIC_V4 = '93.184.216.34';
const PUBLIC_V6 = '2606:4700::1111';

function policy(overrides: Partial<DestinationPolicy> = {}): DestinationPolicy {
  return {
    allowHttp: true,
    allowedNetworks: [],
    resolve: async () => [PUBLIC_V4],
    ...overrides,
  };
}

async function refusal(raw: string, p: DestinationPolicy = policy()): Promise<string> {
  const err: unknown = await resolveDestination(raw, p).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(DestinationRefusedError);
  return (err as DestinationRefusedError).reason;
}

// [url, what the refusal reason must contain]
const REFUSED: [string, string][] = [
  ['http://127.0.0.1/', 'loopback address (127.0.0.1)'],
  ['http://127.1/', 'loopback address (127.0.0.1)'],
  ['http://2130706433/', 'loopback address (127.0.0.1)'],
  ['http://0177.0.0.1/', 'loopback address (127.0.0.1)'],
  ['http://0x7f000001/', 'loopback address (127.0.0.1)'],
  ['http://0x7f.1/', 'loopback address (127.0.0.1)'],
  ['http://0x7f.0x0.0x0.0x1/', 'loopback address (127.0.0.1)'],
  ['http://%31%32%37.0.0.1/', 'loopback address (127.0.0.1)'],
  ['http://127.0.0.1./', 'loopback address (127.0.0.1)'],
  ['http://127.255.255.254:8080/hook', 'loopback address'],
  ['http://[::ffff:127.0.0.1]/', 'loopback address (127.0.0.1)'],
  ['http://[::ffff:7f00:1]/', 'loopback address (127.0.0.1)'],
  ['http://[0:0:0:0:0:ffff:7f00:1]/', 'loopback address (127.0.0.1)'],
  ['http://[::1]:80/', 'loopback address (::1)'],
  ['http://[::]/', 'unspecified address (::)'],
  ['http://0.0.0.0/', 'unspecified address (0.0.0.0)'],
  ['http://0/', 'unspecified address (0.0.0.0)'],
  ['http://169.254.169.254/latest/meta-data/', 'cloud metadata address (169.254.169.254)'],
  ['http://[::ffff:169.254.169.254]/', 'cloud metadata address (169.254.169.254)'],
  ['http://[fd00:ec2::254]/', 'cloud metadata address (fd00:ec2::254)'],
  ['http://169.254.1.1/', 'link-local address'],
  ['http://[2002:7f00:1::]/', 'loopback address (127.0.0.1 in 6to4 2002:7f00:1::)'],
  ['http://[64:ff9b::7f00:1]/', 'loopback address (127.0.0.1 in NAT64 64:ff9b::7f00:1)'],
  ['http://[64:ff9b::a9fe:a9fe]/', 'cloud metadata address (169.254.169.254 in NAT64'],
  ['http://[::127.0.0.1]/', 'loopback address (127.0.0.1 in IPv4-compatible ::7f00:1)'],
  ['http://10.0.0.1/', 'private address (10.0.0.1)'],
  ['http://172.16.5.4/', 'private address'],
  ['http://192.168.1.1/', 'private address'],
  ['http://100.64.0.1/', 'shared (carrier-grade NAT) address'],
  ['http://192.0.0.8/', 'IETF protocol assignment address'],
  ['http://192.0.2.1/', 'documentation address'],
  ['http://198.51.100.7/', 'documentation address'],
  ['http://203.0.113.9/', 'documentation address'],
  ['http://192.88.99.1/', '6to4 relay anycast address'],
  ['http://198.18.0.1/', 'benchmarking address'],
  ['http://224.0.0.1/', 'multicast address'],
  ['http://240.0.0.1/', 'reserved address'],
  ['http://255.255.255.255/', 'broadcast address'],
  ['http://[fc00::1]/', 'unique-local address'],
  ['http://[fe80::1]/', 'link-local address'],
  ['http://[fec0::1]/', 'site-local address'],
  ['http://[ff02::1]/', 'multicast address'],
  ['http://[2001:db8::1]/', 'documentation address'],
  ['http://[100::1]/', 'discard-only address'],
  ['http://[4000::1]/', 'reserved address'],
  ['ftp://example.com/', 'url must use https or http'],
  ['javascript:alert(1)', 'url must use https or http'],
  ['file:///etc/passwd', 'url must use https or http'],
  ['data:text/plain,hi', 'url must use https or http'],
  ['http://good.com@127.0.0.1/', 'url must not contain credentials'],
  ['https://user:secret@example.com/', 'url must not contain credentials'],
  ['http://127.0.0.1:80@example.com/', 'url must not contain credentials'],
  ['http://localhost/', 'url targets localhost (localhost)'],
  ['http://localhost./', 'url targets localhost (localhost)'],
  ['http://LOCALHOST/', 'url targets localhost (localhost)'],
  ['http://loc%61lhost/', 'url targets localhost (localhost)'],
  ['http://api.localhost/', 'url targets localhost (api.localhost)'],
  ['http://foo.internal/', 'internal host name (foo.internal)'],
  ['http://FOO.Internal./', 'internal host name (foo.internal)'],
  ['http://printer.local/', 'internal host name (printer.local)'],
  ['http://metadata.google.internal/computeMetadata/v1/', 'cloud metadata host (metadata.google.internal)'],
  ['http://metadata/', 'cloud metadata host (metadata)'],
  ['http://instance-data/', 'cloud metadata host (instance-data)'],
  ['http://intranet/', 'fully qualified name (intranet)'],
  ['http://foo..example.com/', 'host name is malformed'],
  [`https://example.com/${'a'.repeat(2048)}`, 'longer than 2048 characters'],
  ['https://exa mple.com/', 'spaces or control characters'],
  ['https://example.com/\n', 'spaces or control characters'],
  ['not a url', 'spaces or control characters'],
  ['/relative/path', 'not a valid absolute URL'],
  ['http://[fe80::1%25eth0]/', 'not a valid absolute URL'],
];

describe('resolveDestination refuses', () => {
  it.each(REFUSED)('%s', async (raw, reason) => {
    expect(await refusal(raw)).toContain(reason);
    // checkUrl alone refuses them too: none of them needs DNS to be judged.
    expect(() => checkUrl(raw, policy())).toThrow(DestinationRefusedError);
  });

  it('http when allowHttp is off', async () => {
    expect(await refusal('http://example.com/', policy({ allowHttp: false }))).toBe('url must use https');
  });

  it('a name that resolves to one public and one private address', async () => {
    const resolve = async () => [PUBLIC_V4, '10.1.2.3'];
    expect(await refusal('https://mixed.example.com/', policy({ resolve }))).toBe(
      'host mixed.example.com resolves to a private address (10.1.2.3)',
    );
  });

  it('a name that resolves to an IPv4-mapped loopback address', async () => {
    const resolve = async () => ['::ffff:127.0.0.1'];
    expect(await refusal('https://mapped.example.com/', policy({ resolve }))).toContain(
      'resolves to a loopback address (127.0.0.1)',
    );
  });

  it('when DNS fails, with the DNS reason', async () => {
    const resolve = async () => {
      throw Object.assign(new Error('queryA ENOTFOUND nope.example.com'), { code: 'ENOTFOUND' });
    };
    expect(await refusal('https://nope.example.com/', policy({ resolve }))).toBe(
      'dns lookup for nope.example.com failed (ENOTFOUND)',
    );
  });

  it('when DNS returns no address', async () => {
    const resolve = async () => [];
    expect(await refusal('https://empty.example.com/', policy({ resolve }))).toBe(
      'host empty.example.com has no addresses',
    );
  });

  it('without naming the path, query or credentials in the reason', async () => {
    const reason = await refusal('https://user:hunter2@example.com/hook?token=s3cr3t');
    expect(reason).not.toMatch(/hunter2|s3cr3t|token/);
  });
});

describe('resolveDestination accepts', () => {
  it('a public IPv4 literal without resolving it', async () => {
    const resolve = jest.fn(async () => ['127.0.0.1']);
    const dest = await resolveDestination(`https://${PUBLIC_V4}/hook`, policy({ resolve }));
    expect(dest).toMatchObject({ address: PUBLIC_V4, family: 4 });
    expect(resolve).not.toHaveBeenCalled();
  });

  it('a public IPv6 literal', async () => {
    const dest = await resolveDestination(`https://[${PUBLIC_V6}]:8443/hook`, policy());
    expect(dest).toMatchObject({ address: PUBLIC_V6, family: 6 });
    expect(dest.url.port).toBe('8443');
  });

  it('public IPv6 forms that embed a public IPv4 address', async () => {
    for (const host of ['[64:ff9b::5db8:d822]', '[2002:5db8:d822::1]', '[::ffff:93.184.216.34]']) {
      await expect(resolveDestination(`https://${host}/`, policy())).resolves.toMatchObject({
        url: expect.any(URL),
      });
    }
  });

  it('a host name, connecting to its first address and resolving the name without a trailing dot', async () => {
    const resolve = jest.fn(async () => [PUBLIC_V6, PUBLIC_V4]);
    const dest = await resolveDestination('https://Hooks.Example.com./in', policy({ resolve }));
    expect(dest).toMatchObject({ address: PUBLIC_V6, family: 6 });
    expect(dest.url.hostname).toBe('hooks.example.com.');
    expect(resolve).toHaveBeenCalledWith('hooks.example.com');
  });

  it('http when allowHttp is on', async () => {
    await expect(resolveDestination('http://example.com/', policy())).resolves.toMatchObject({
      address: PUBLIC_V4,
    });
  });

  it('a URL with a fragment, which it strips', async () => {
    const dest = await resolveDestination('https://example.com/hook?a=1#part', policy());
    expect(dest.url.href).toBe('https://example.com/hook?a=1');
  });
});

describe('allowedNetworks', () => {
  const allowed: Network[] = [parseNetwork('127.0.0.2/32')!];

  it('let exactly the allowed address through', async () => {
    const p = policy({ allowedNetworks: allowed });
    await expect(resolveDestination('http://127.0.0.2:8080/', p)).resolves.toMatchObject({
      address: '127.0.0.2',
      family: 4,
    });
    expect(await refusal('http://127.0.0.1:8080/', p)).toContain('loopback address (127.0.0.1)');
  });

  it('apply to resolved addresses and to embedded IPv4 forms', async () => {
    const p = policy({ allowedNetworks: allowed, resolve: async () => ['127.0.0.2'] });
    await expect(resolveDestination('https://internal-ok.example.com/', p)).resolves.toMatchObject({
      address: '127.0.0.2',
    });
    await expect(resolveDestination('http://[::ffff:127.0.0.2]/', p)).resolves.toBeDefined();
    await expect(resolveDestination('http://[2002:7f00:2::]/', p)).resolves.toBeDefined();
    expect(await refusal('http://[2002:7f00:1::]/', p)).toContain('loopback');
  });

  it('never unblock cloud metadata addresses, in any spelling', () => {
    const wide = ['169.254.0.0/16', '100.64.0.0/10', '192.0.0.0/24', 'fd00::/8', '::/0', '0.0.0.0/0'].map(
      (c) => parseNetwork(c)!,
    );
    for (const ip of [
      '169.254.169.254',
      '100.100.100.200',
      '192.0.0.192',
      'fd00:ec2::254',
      '::ffff:169.254.169.254',
      '64:ff9b::a9fe:a9fe',
      '2002:a9fe:a9fe::',
    ]) {
      expect(blockedReason(ip, wide)).toContain('cloud metadata');
    }
    expect(blockedReason('169.254.1.1', wide)).toBeUndefined();
  });

  it('measure the length after encoding', async () => {
    const raw = `https://example.com/${'é'.repeat(1000)}`;
    expect(raw.length).toBeLessThan(2048);
    expect(await refusal(raw, policy())).toContain('once encoded');
  });

  it('do not unblock forbidden host names', async () => {
    const p = policy({ allowedNetworks: [parseNetwork('127.0.0.0/8')!], resolve: async () => ['127.0.0.1'] });
    expect(await refusal('http://localhost/', p)).toContain('localhost');
  });
});

describe('blockedReason', () => {
  it('is undefined for public addresses', () => {
    for (const ip of [PUBLIC_V4, PUBLIC_V6, '8.8.8.8', '2001:4860:4860::8888', '::ffff:8.8.8.8']) {
      expect(blockedReason(ip, [])).toBeUndefined();
    }
  });

  it('names the range edges correctly', () => {
    expect(blockedReason('172.15.255.255', [])).toBeUndefined();
    expect(blockedReason('172.32.0.0', [])).toBeUndefined();
    expect(blockedReason('172.31.255.255', [])).toContain('private');
    expect(blockedReason('100.63.255.255', [])).toBeUndefined();
    expect(blockedReason('100.128.0.0', [])).toBeUndefined();
    expect(blockedReason('223.255.255.255', [])).toBeUndefined();
    expect(blockedReason('169.254.169.253', [])).toBe('a link-local address (169.254.169.253)');
  });

  it('refuses what is not an address', () => {
    expect(blockedReason('example.com', [])).toBe('an invalid address (example.com)');
    expect(blockedReason('fe80::1%eth0', [])).toContain('an invalid address');
  });
});
