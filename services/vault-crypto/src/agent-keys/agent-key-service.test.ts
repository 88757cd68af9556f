import type { AuditRecordInput } from '@custos/events';
import type { SecretRow } from '../secrets/secret-store.js';
import { AgentKeyService } from './agent-key-service.js';

// AgentKeyService.load over in-memory fakes of its ports: the order open → audit → return.

const ORG = '22222222-2222-4222-8222-222222222222';
const SECRET = '44444444-4444-4444-8444-444444444444';
const KEY = '33333333-3333-4333-8333-333333333333';
const VAULT = { id: '55555555-5555-4555-8555-555555555555' };
const ROW = {
  id: SECRET,
  vaultId: VAULT.id,
  path: `agents/x/evm/${KEY}`,
  metadata: { key_id: KEY, agent_id: 'a', chain: 'evm', key_version: 1, curve: 'secp256k1' },
} as unknown as SecretRow;

function rig(opts: { openFails?: boolean; auditFails?: boolean } = {}) {
  const steps: string[] = [];
  const audits: AuditRecordInput[] = [];
  const opened: Buffer[] = [];
  const service = new AgentKeyService({
    vaults: {
      ensureSystemVaults: async () => undefined,
      findByName: async () => VAULT,
    } as never,
    secrets: {
      find: async () => undefined,
      insertNextVersion: async () => 'cap',
      byId: async () => ROW,
    } as never,
    ring: { active: async () => ({}) } as never,
    open: async () => {
      steps.push('open');
      if (opts.openFails) throw new Error('the data key cannot be unwrapped');
      const k = Buffer.alloc(32, 9);
      opened.push(k);
      return k;
    },
    audit: async (r) => {
      steps.push('audit');
      if (opts.auditFails) throw new Error('audit is down');
      audits.push(r);
    },
  });
  const load = () => service.load({ orgId: ORG, secretId: SECRET, keyId: KEY, purpose: 'sign' });
  return { load, steps, audits, opened };
}

describe('AgentKeyService.load', () => {
  it('opens the key, then records secret.agent_key_loaded, then returns it', async () => {
    const r = rig();
    const out = await r.load();
    expect(out.privateKey).toEqual(Buffer.alloc(32, 9));
    expect(r.steps).toEqual(['open', 'audit']);
    expect(r.audits).toEqual([
      expect.objectContaining({ action: 'secret.agent_key_loaded', resourceId: SECRET, orgId: ORG }),
    ]);
  });

  it('leaves no "loaded" record when the key cannot be opened', async () => {
    const r = rig({ openFails: true });
    await expect(r.load()).rejects.toThrow('the data key cannot be unwrapped');
    expect(r.steps).toEqual(['open']);
    expect(r.audits).toEqual([]);
  });

  it('returns nothing, and zeroes the opened key, when the load cannot be recorded', async () => {
    const r = rig({ auditFails: true });
    await expect(r.load()).rejects.toThrow('audit is down');
    expect(r.opened[0]).toEqual(Buffer.alloc(32, 0));
  });
});
