// Sign-in and key-exchange limits: identity's per-account lockout and delay and its per-key
// wrong-secret bucket, the gateway's credential and exchange rate limits. Blank values leave the
// variables out (the services' defaults, docs/configuration.md apply); set ones reach only the
// service that reads them; the schema refuses what the service would refuse at start.
import { SERVICES } from './facts';
import { REQUIRED_SETS, renderChart, renderFailure, scenarios, serviceEnv, sets } from './helm';

const IDENTITY_LIMITS = {
  'auth.loginLockout.threshold=12': ['LOGIN_LOCKOUT_THRESHOLD', '12'],
  'auth.loginLockout.windowSeconds=600': ['LOGIN_LOCKOUT_WINDOW_SECONDS', '600'],
  'auth.loginLockout.lockSeconds=1800': ['LOGIN_LOCKOUT_SECONDS', '1800'],
  'auth.loginDelay.freeFailures=5': ['LOGIN_DELAY_FREE_FAILURES', '5'],
  'auth.loginDelay.baseMs=100': ['LOGIN_DELAY_BASE_MS', '100'],
  'auth.loginDelay.maxMs=3000': ['LOGIN_DELAY_MAX_MS', '3000'],
  'auth.exchangeWrongSecretsPerKeyPerMinute=40': ['EXCHANGE_WRONG_SECRETS_PER_KEY_PER_MINUTE', '40'],
} as const;

const GATEWAY_LIMITS = {
  'http.rateLimit.authPerMinute=45': ['AUTH_RATE_LIMIT_PER_MINUTE', '45'],
  'http.rateLimit.authBurst=15': ['AUTH_RATE_LIMIT_BURST', '15'],
  'http.rateLimit.exchange.perKeyPerMinute=90': ['EXCHANGE_RATE_LIMIT_PER_KEY_PER_MINUTE', '90'],
  'http.rateLimit.exchange.perKeyBurst=45': ['EXCHANGE_RATE_LIMIT_PER_KEY_BURST', '45'],
  'http.rateLimit.exchange.perIpPerMinute=5000': ['EXCHANGE_RATE_LIMIT_PER_IP_PER_MINUTE', '5000'],
  'http.rateLimit.exchange.perIpBurst=2500': ['EXCHANGE_RATE_LIMIT_PER_IP_BURST', '2500'],
} as const;

const ALL = [...Object.values(IDENTITY_LIMITS), ...Object.values(GATEWAY_LIMITS)].map(([name]) => name);

describe.each(scenarios)('sign-in and exchange limits with $label', ({ args }) => {
  it('are left to the services’ defaults when blank', () => {
    const objects = renderChart(args);
    for (const service of SERVICES) {
      const env = serviceEnv(objects, service);
      expect({ service, set: ALL.filter((n) => env.has(n)) }).toEqual({ service, set: [] });
    }
  });
});

describe('sign-in and exchange limits, when set', () => {
  const objects = renderChart([
    ...REQUIRED_SETS,
    ...sets(...Object.keys(IDENTITY_LIMITS), ...Object.keys(GATEWAY_LIMITS)),
  ]);
  const value = (service: string, name: string) => serviceEnv(objects, service).get(name)?.value;

  it('identity gets its lockout, delay and wrong-secret limits', () => {
    for (const [name, v] of Object.values(IDENTITY_LIMITS))
      expect([name, value('identity', name)]).toEqual([name, v]);
  });

  it('the gateway gets its credential and exchange rate limits', () => {
    for (const [name, v] of Object.values(GATEWAY_LIMITS))
      expect([name, value('gateway', name)]).toEqual([name, v]);
  });

  it('no other service gets any of them', () => {
    const own: Record<string, readonly string[]> = {
      identity: Object.values(IDENTITY_LIMITS).map(([n]) => n),
      gateway: Object.values(GATEWAY_LIMITS).map(([n]) => n),
    };
    for (const service of SERVICES) {
      const env = serviceEnv(objects, service);
      const foreign = ALL.filter((n) => env.has(n) && !(own[service] ?? []).includes(n));
      expect({ service, foreign }).toEqual({ service, foreign: [] });
    }
  });

  it.each([
    'auth.loginLockout.threshold=2',
    'auth.loginLockout.windowSeconds=86401',
    'auth.loginDelay.maxMs=4001',
    'auth.exchangeWrongSecretsPerKeyPerMinute=0',
    'http.rateLimit.exchange.perIpPerMinute=0',
    'http.rateLimit.exchange.unknown=1',
  ])('the schema refuses %s', (bad) => {
    const r = renderFailure([...REQUIRED_SETS, ...sets(bad)]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(
      /values don't meet the specifications of the schema|additional properties|must be/i,
    );
  });
});
