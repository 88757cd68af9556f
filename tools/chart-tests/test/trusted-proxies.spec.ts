// http.trustedProxies: only the ingress controller's pods may choose the client address the gateway
// sees, so a range wider than /16 (IPv4) or /48 (IPv6) is refused unless allowBroadTrustedProxies.
import { REQUIRED_SETS, renderChart, renderFailure, scenarios, serviceEnv, sets } from './helm';

const production = scenarios[1]!.args;

describe('trusted proxies', () => {
  it('values-production.yaml trusts only the ingress controller’s dedicated pool', () => {
    const env = serviceEnv(renderChart(production), 'gateway');
    expect(env.get('TRUSTED_PROXIES')).toEqual({ name: 'TRUSTED_PROXIES', value: '10.100.250.0/24' });
  });

  it.each(['10.0.0.0/8', '10.96.0.0/15', '0.0.0.0/0', 'fd00::/32', '::/0'])('refuses %s', (cidr) => {
    const { status, stderr } = renderFailure([
      ...production,
      '--set',
      `http.trustedProxies={10.100.250.0/24,${cidr}}`,
    ]);
    expect(status).not.toBe(0);
    expect(stderr).toContain(`http.trustedProxies: ${cidr} is wider than`);
    expect(stderr).toContain('allowBroadTrustedProxies');
  });

  it.each(['10.100.0.0/16', '10.100.250.7', '192.168.3.0/24', 'fd00:10:244::/48', 'fd00::1'])(
    'accepts %s',
    (cidr) => {
      const env = serviceEnv(
        renderChart([...REQUIRED_SETS, '--set', `http.trustedProxies={${cidr}}`]),
        'gateway',
      );
      expect(env.get('TRUSTED_PROXIES')?.value).toBe(cidr);
    },
  );

  it('accepts a broad range only with http.allowBroadTrustedProxies=true', () => {
    const env = serviceEnv(
      renderChart([
        ...production,
        ...sets('http.trustedProxies={10.0.0.0/8}', 'http.allowBroadTrustedProxies=true'),
      ]),
      'gateway',
    );
    expect(env.get('TRUSTED_PROXIES')?.value).toBe('10.0.0.0/8');
  });
});
