// Install-level identity settings (issue 16): who may sign up (SIGNUP_MODE), the absolute lifetime
// of a session, the argon2id cost of password hashes, and SMTP without TLS (development only).
// Blank values leave the variables out (identity's defaults apply: invite, 30 days, 64 MiB/3/1,
// TLS required); set ones reach identity alone; the schema refuses what identity would refuse.
import { SERVICES } from './facts';
import { REQUIRED_SETS, renderChart, renderFailure, scenarios, serviceEnv, sets } from './helm';

const SETTINGS = {
  'auth.signupMode=closed': ['SIGNUP_MODE', 'closed'],
  'tokens.refreshTokenFamilyTtlSeconds=86400': ['REFRESH_TOKEN_FAMILY_TTL_SECONDS', '86400'],
  'auth.passwordHash.memoryKib=131072': ['ARGON2_MEMORY_KIB', '131072'],
  'auth.passwordHash.timeCost=4': ['ARGON2_TIME_COST', '4'],
  'auth.passwordHash.parallelism=2': ['ARGON2_PARALLELISM', '2'],
  'mail.allowInsecure=true': ['SMTP_ALLOW_INSECURE', 'true'],
} as const;

const ALL = Object.values(SETTINGS).map(([name]) => name);

describe.each(scenarios)('install settings with $label', ({ args }) => {
  it('are left to identity’s defaults (SMTP with TLS among them)', () => {
    const objects = renderChart(args);
    for (const service of SERVICES) {
      const env = serviceEnv(objects, service);
      expect({ service, set: ALL.filter((n) => env.has(n)) }).toEqual({ service, set: [] });
    }
  });
});

describe('install settings, when set', () => {
  const objects = renderChart([...REQUIRED_SETS, ...sets(...Object.keys(SETTINGS))]);

  it('reach identity', () => {
    const env = serviceEnv(objects, 'identity');
    for (const [name, v] of Object.values(SETTINGS)) expect([name, env.get(name)?.value]).toEqual([name, v]);
  });

  it('reach no other service', () => {
    for (const service of SERVICES.filter((s) => s !== 'identity')) {
      const env = serviceEnv(objects, service);
      expect({ service, set: ALL.filter((n) => env.has(n)) }).toEqual({ service, set: [] });
    }
  });

  it.each(['open', 'invite'])('signupMode %s passes as it is', (mode) => {
    const env = serviceEnv(renderChart([...REQUIRED_SETS, ...sets(`auth.signupMode=${mode}`)]), 'identity');
    expect(env.get('SIGNUP_MODE')?.value).toBe(mode);
  });

  it.each([
    'auth.signupMode=public',
    'auth.passwordHash.memoryKib=19456',
    'auth.passwordHash.timeCost=0',
    'auth.passwordHash.parallelism=17',
    'auth.passwordHash.unknown=1',
    'tokens.refreshTokenFamilyTtlSeconds=60',
  ])('the schema refuses %s', (bad) => {
    const r = renderFailure([...REQUIRED_SETS, ...sets(bad)]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(
      /values don't meet the specifications of the schema|additional properties|must be/i,
    );
  });
});
