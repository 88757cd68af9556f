import fs from 'node:fs';
import path from 'node:path';
import { NATS_SERVICE_NAMES } from '@custos/events';
import { ACTION_PRODUCERS, mayRecord } from './audit-producers';

const SERVICES_DIR = path.resolve(__dirname, '..', '..', '..');

// The action literals a service passes to its audit writers: the arguments of auditOf, the
// services' audit helpers (`audit`, `by`, `now`, `grantAudit` ...) up to the details object, and
// records spelled out as `action: '...'`.
const CALL = /\b(?:auditOf|audit|by|now|grantAudit|ipRuleAudit|shareAudit|auditRefusal|txAudit)\(/g;
const LITERAL = /'([a-z_]+(?:\.[a-z_]+)+)'/g;
const SPELLED_OUT = /action:\s*'([a-z_]+(?:\.[a-z_]+)+)'/g;

function actionsWrittenBy(service: string): Set<string> {
  const found = new Set<string>();
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts')) {
        const text = fs.readFileSync(p, 'utf8');
        for (const m of text.matchAll(CALL)) {
          const args = text.slice(m.index + m[0].length, m.index + m[0].length + 300).split(/[{;]/)[0]!;
          for (const l of args.matchAll(LITERAL)) found.add(l[1]!);
        }
        for (const l of text.matchAll(SPELLED_OUT)) found.add(l[1]!);
      }
    }
  };
  walk(path.join(SERVICES_DIR, service, 'src'));
  return found;
}

describe('mayRecord', () => {
  it('lets only the owner of a resource family record its actions', () => {
    expect(mayRecord('vault-crypto', 'secret.read')).toBe(true);
    expect(mayRecord('webhook-dispatcher', 'secret.read')).toBe(false);
    expect(mayRecord('identity', 'auth.login')).toBe(true);
    expect(mayRecord('approvals', 'approval.decided')).toBe(true);
    expect(mayRecord('signer', 'approval.consumed')).toBe(false);
    expect(mayRecord('approvals', 'agent.transaction.confirmed')).toBe(false);
    expect(mayRecord('policy', 'auth.login')).toBe(false);
    expect(mayRecord('webhook-dispatcher', 'webhook.created')).toBe(true);
    expect(mayRecord('vault-crypto', 'nothing.known')).toBe(false);
    expect(mayRecord('vault-crypto', 'secret')).toBe(false);
    expect(mayRecord('vault-crypto', 'constructor.x')).toBe(false);
    // A two-part sub-family: signer records agents' transactions, identity the rest of `agent`.
    expect(mayRecord('signer', 'agent.transaction.signed')).toBe(true);
    expect(mayRecord('signer', 'agent.transaction.refused')).toBe(true);
    expect(mayRecord('identity', 'agent.transaction.signed')).toBe(false);
    expect(mayRecord('signer', 'agent.created')).toBe(false);
    expect(mayRecord('identity', 'agent.created')).toBe(true);
    // ... and agents' sign intents.
    expect(mayRecord('signer', 'agent.sign.personal_sign')).toBe(true);
    expect(mayRecord('signer', 'agent.sign.refused')).toBe(true);
    expect(mayRecord('identity', 'agent.sign.typed_data')).toBe(false);
  });
});

describe('ACTION_PRODUCERS against the services that write audit records', () => {
  const producers = NATS_SERVICE_NAMES.filter((s) => s !== 'audit');

  it.each(producers)('%s may record every action its code writes', (service) => {
    const refused = [...actionsWrittenBy(service)].filter((a) => !mayRecord(service, a));
    expect(refused).toEqual([]);
  });

  it('finds the actions it checks (the scan is not blind)', () => {
    for (const [service, action] of [
      ['vault-crypto', 'secret.read'],
      ['vault-crypto', 'share.accessed'],
      ['identity', 'auth.login'],
      ['identity', 'auth.logout'],
      ['policy', 'ip_rule.created'],
      ['webhook-dispatcher', 'webhook.created'],
      ['signer', 'signing_key.created'],
      ['signer', 'chain.updated'],
      ['signer', 'agent.transaction.signed'],
      ['signer', 'agent.transaction.broadcast'],
      ['signer', 'agent.sign.personal_sign'],
      ['signer', 'agent.sign.transaction'],
    ] as const) {
      expect(actionsWrittenBy(service).has(action)).toBe(true);
    }
  });

  it('names only services that publish audit records', () => {
    for (const producer of Object.values(ACTION_PRODUCERS)) expect(producers).toContain(producer);
  });
});
