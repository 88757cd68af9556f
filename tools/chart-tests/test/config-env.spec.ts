// Every variable the chart sets on a service is one that service reads: each name is in that
// service's table of docs/configuration.md (generated from the services' config schemas), so a
// renamed or removed variable cannot linger in the chart unnoticed. Rendered with every optional
// feature on, so each derived variable appears at least once.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { SERVICES } from './facts';
import { renderChart, repoRoot, scenarios, serviceEnv, sets } from './helm';

/** Read by the OpenTelemetry SDK itself, not by a service's config schema. */
const SDK_VARIABLES = ['OTEL_BSP_SCHEDULE_DELAY'];

/** The variable names of each service's table in docs/configuration.md ("### <service>"). */
function documentedVariables(): Map<string, Set<string>> {
  const doc = readFileSync(path.join(repoRoot, 'docs', 'configuration.md'), 'utf8');
  const bySection = new Map<string, Set<string>>();
  let current: string | undefined;
  for (const line of doc.split('\n')) {
    const heading = /^###\s+(\S+)/.exec(line);
    if (heading) current = heading[1];
    const row = /^\|\s*`([A-Z0-9_]+)`/.exec(line);
    if (current && row) {
      if (!bySection.has(current)) bySection.set(current, new Set());
      bySection.get(current)!.add(row[1]!);
    }
  }
  return bySection;
}

describe('the chart sets only variables the services read (docs/configuration.md)', () => {
  const documented = documentedVariables();
  const everything = [
    ...scenarios[1]!.args,
    ...sets(
      'otel.endpoint=http://otel:4318',
      'grpc.maxConnectionAgeMs=60000',
      'nats.tls.caSecret=nats-ca',
      'redis.tls.caSecret=redis-ca',
      'redis.sentinel.enabled=true',
      'redis.sentinel.hosts={sentinel-0:26379}',
      'redis.sentinel.username=sentinel',
      'redis.sentinel.existingSecret=sentinel',
      'approvals.ttlSeconds=3600',
      'approvals.sweepIntervalMs=1000',
      'auth.loginLockout.threshold=12',
      'http.rateLimit.authPerMinute=45',
      'signer.chainRpcUrlsExistingSecret=chains',
      'webhooks.allowedCidrs={10.20.0.0/16}',
    ),
  ];

  it('reads the tables (the parser itself works)', () => {
    expect(documented.get('identity')?.has('TOKEN_SIGNING_KEK')).toBe(true);
    expect(documented.get('gateway')?.has('TRUSTED_PROXIES')).toBe(true);
  });

  it.each(SERVICES)('%s', (service) => {
    const env = serviceEnv(renderChart(everything), service);
    const known = documented.get(service) ?? new Set<string>();
    const unknown = [...env.keys()].filter((name) => !known.has(name) && !SDK_VARIABLES.includes(name));
    expect({ service, unknown }).toEqual({ service, unknown: [] });
  });
});
