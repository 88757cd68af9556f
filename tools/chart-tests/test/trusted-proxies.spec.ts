// http.trustedProxies: only the ingress controller's pods may choose the client address the gateway
// sees, so the chart refuses a range wider than /20 (IPv4) or /64 (IPv6), an IPv4-mapped or
// zero-prefixed IPv6 spelling (which would trust IPv4 peers), and a range that contains a whole pod,
// Service or node network of networkPolicy.internet, unless http.allowBroadTrustedProxies.
import { REQUIRED_SETS, renderChart, renderFailure, scenarios, serviceEnv, sets } from './helm';

const production = scenarios[1]!.args;

function refused(args: string[], message: string): void {
  const { status, stderr } = renderFailure(args);
  expect({ status, message: stderr.includes(message) }).toEqual({ status: 1, message: true });
}

describe('trusted proxies', () => {
  it('values-production.yaml trusts only the ingress controller’s dedicated pool', () => {
    const env = serviceEnv(renderChart(production), 'gateway');
    expect(env.get('TRUSTED_PROXIES')).toEqual({ name: 'TRUSTED_PROXIES', value: '10.100.250.0/24' });
  });

  it.each([
    '10.0.0.0/8',
    '10.100.0.0/16',
    '10.244.0.0/16',
    '10.42.0.0/19',
    '0.0.0.0/0',
    'fd00::/32',
    'fd00:10:244::/48',
    '::/0',
  ])('refuses %s (too wide)', (cidr) => {
    refused(
      [...production, '--set', `http.trustedProxies={10.100.250.0/24,${cidr}}`],
      `http.trustedProxies: ${cidr} is wider than`,
    );
  });

  it.each([
    '::ffff:0.0.0.0/96',
    '::FFFF:0:0/96',
    '0:0:0:0:0:ffff:0:0/96',
    '::ffff:10.0.0.0/104',
    '::10.0.0.0/104',
    '0::/96',
  ])('refuses the IPv4-mapped or zero-prefixed IPv6 range %s', (cidr) => {
    refused([...production, '--set', `http.trustedProxies={${cidr}}`], 'IPv4-mapped or zero-prefixed IPv6');
  });

  it('refuses a range that contains a pod, Service or node network of networkPolicy.internet', () => {
    for (const [key, net] of [
      ['podCidrs', '10.100.8.0/22'],
      ['serviceCidrs', '10.100.0.0/24'],
      ['nodeCidrs', '10.100.15.0/24'],
    ]) {
      refused(
        [
          ...production,
          ...sets(`networkPolicy.internet.${key}={${net}}`, 'http.trustedProxies={10.100.0.0/20}'),
        ],
        `http.trustedProxies: 10.100.0.0/20 contains ${net}`,
      );
    }
    // A pool inside the pod network (the recommended dedicated pool) is fine.
    const env = serviceEnv(
      renderChart([
        ...production,
        ...sets('networkPolicy.internet.podCidrs={10.100.0.0/16}', 'http.trustedProxies={10.100.250.0/24}'),
      ]),
      'gateway',
    );
    expect(env.get('TRUSTED_PROXIES')?.value).toBe('10.100.250.0/24');
  });

  it.each([
    '10.100.240.0/20',
    '10.100.250.7',
    '192.168.3.0/24',
    'fd00:10:244:1::/64',
    'fd00::1',
    '2001:db8:ffff:1::/64',
  ])('accepts %s', (cidr) => {
    const env = serviceEnv(
      renderChart([...REQUIRED_SETS, '--set', `http.trustedProxies={${cidr}}`]),
      'gateway',
    );
    expect(env.get('TRUSTED_PROXIES')?.value).toBe(cidr);
  });

  it('accepts any of them only with http.allowBroadTrustedProxies=true', () => {
    const env = serviceEnv(
      renderChart([
        ...production,
        ...sets('http.trustedProxies={10.0.0.0/8,::ffff:0:0/96}', 'http.allowBroadTrustedProxies=true'),
      ]),
      'gateway',
    );
    expect(env.get('TRUSTED_PROXIES')?.value).toBe('10.0.0.0/8,::ffff:0:0/96');
  });
});
