import type { Principal } from '@custos/auth';
import {
  InvalidArgumentError,
  type Logger,
  NotFoundError,
  PermissionDeniedError,
  type Database,
} from '@custos/service-kit';
import { Wallet } from 'ethers';
import type { ChainRecord } from '../chains/chain-types.js';
import { evmAdapter } from '../keys/evm-adapter.js';
import type { SigningKeyRecord } from '../keys/key-types.js';
import { CustodyService } from './custody-service.js';
import type { CustodyStore } from './custody-store.js';

// CustodyService over in-memory fakes of its ports (database, stores, identity, vault-crypto, the
// step-up check, the key loader): the order of the checks (step-up last, so a refused request
// spends no step-up token), what is recorded for each refusal, and what an import replaces.

const ORG = '22222222-2222-4222-8222-222222222222';
const AGENT = '11111111-1111-4111-8111-111111111111';
const USER = '66666666-6666-4666-8666-666666666666';
const PK_HEX = '4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318';
const NEW_PK = `0x${'59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d'}`;
const ADDRESS = new Wallet(`0x${PK_HEX}`).address;
const logger = { warn() {}, error() {}, info() {}, debug() {} } as unknown as Logger;

const admin = { kind: 'user', userId: USER, orgId: ORG, role: 'admin' } as unknown as Principal;
const member = { kind: 'user', userId: USER, orgId: ORG, role: 'member' } as unknown as Principal;
const CHAIN = { name: 'anvil', chainId: 31337n, family: 'evm', nativeDecimals: 18 } as ChainRecord;

function keyOf(over: Partial<SigningKeyRecord> = {}): SigningKeyRecord {
  return {
    id: '33333333-3333-4333-8333-333333333333',
    orgId: ORG,
    agentId: AGENT,
    family: 'evm',
    curve: 'secp256k1',
    publicKey: '0x04',
    address: ADDRESS,
    keyVersion: 1,
    custody: 'server',
    isActive: true,
    vaultSecretId: '44444444-4444-4444-8444-444444444444',
    createdBy: USER,
    createdAt: new Date(),
    rotatedAt: null,
    ...over,
  };
}

function rig(
  opts: {
    active?: SigningKeyRecord;
    agentMissing?: boolean;
    stepUpRefuses?: boolean;
    taken?: boolean;
    chainUnknown?: boolean;
  } = {},
) {
  const steps: string[] = [];
  const records: { action: string; metadata: Record<string, unknown> }[] = [];
  const forgotten: string[] = [];
  const tx = {
    insert: () => ({
      values: async (v: { name: string; payload: Record<string, unknown> }) => {
        if (v.name === 'audit.recorded') {
          records.push({
            action: v.payload['action'] as string,
            metadata: v.payload['metadata'] as Record<string, unknown>,
          });
        }
      },
    }),
  };
  const db = { transaction: async (fn: (t: unknown) => unknown) => fn(tx) } as unknown as Database;
  const store = {
    addressTaken: async () => {
      steps.push('addressTaken');
      return opts.taken ?? false;
    },
    importKey: async (
      previous: SigningKeyRecord | undefined,
      row: SigningKeyRecord,
      write: (t: unknown, k: SigningKeyRecord, old: SigningKeyRecord | undefined) => Promise<void>,
    ) => {
      steps.push('importKey');
      const k = { ...row, isActive: true, createdAt: new Date(), rotatedAt: null };
      const old = previous ? { ...previous, isActive: false } : undefined;
      await write(tx, k, old);
      return { key: k, previous: old };
    },
  } as unknown as CustodyStore;
  const service = new CustodyService({
    db,
    store,
    keys: {
      active: async () => {
        steps.push('active');
        return opts.active;
      },
      nextVersion: async () => (opts.active?.keyVersion ?? 0) + 1,
    },
    chains: {
      resolve: async () => {
        steps.push('chain');
        if (opts.chainUnknown) throw new InvalidArgumentError('chain', 'is not a known chain');
        return CHAIN;
      },
    },
    adapters: { evm: evmAdapter },
    vault: {
      storeKey: async () => {
        steps.push('storeKey');
        return '77777777-7777-4777-8777-777777777777';
      },
      loadKey: async () => {
        steps.push('loadKey');
        return Buffer.from(PK_HEX, 'hex');
      },
    },
    identity: {
      requireAgentInOrg: async () => {
        steps.push('agent');
        if (opts.agentMissing) throw new NotFoundError('agent', AGENT);
      },
    },
    stepUp: {
      confirm: async () => {
        steps.push('stepUp');
        if (opts.stepUpRefuses) {
          throw new PermissionDeniedError('the step-up credential is not valid', {
            type: 'step_up_required',
          });
        }
      },
    },
    loader: { forget: (id: string) => void forgotten.push(id) },
    logger,
  });
  return { service, steps, records, forgotten };
}

describe('CustodyService.export', () => {
  it('checks the step-up last, then opens the key and records signing_key.export (never the key)', async () => {
    const r = rig({ active: keyOf() });
    const out = await r.service.export(admin, AGENT, 'anvil', 'rat_x');
    expect(out.privateKey.toString('hex')).toBe(PK_HEX);
    expect(r.steps).toEqual(['chain', 'agent', 'active', 'stepUp', 'loadKey']);
    expect(r.records.map((x) => x.action)).toEqual(['signing_key.export']);
    expect(JSON.stringify(r.records)).not.toContain(PK_HEX);
  });

  it.each([
    ['a member', { active: keyOf() }, member, 'permission_denied', undefined],
    ['an unknown chain', { active: keyOf(), chainUnknown: true }, admin, 'invalid_argument', 'chain'],
    ['an agent of another org', { active: keyOf(), agentMissing: true }, admin, 'not_found', undefined],
    ['no key', {}, admin, 'not_found', undefined],
    [
      'a client_tss key',
      { active: keyOf({ custody: 'client_tss' }) },
      admin,
      'custody_not_exportable',
      'chain',
    ],
  ] as const)(
    'refuses %s before the step-up, recorded signing_key.export.refused',
    async (_what, opts, p, reason, field) => {
      const r = rig(opts);
      await expect(r.service.export(p, AGENT, 'anvil', 'rat_x')).rejects.toBeDefined();
      expect(r.steps).not.toContain('stepUp');
      expect(r.steps).not.toContain('loadKey');
      expect(r.records).toEqual([
        {
          action: 'signing_key.export.refused',
          metadata: expect.objectContaining({ reason, ...(field ? { field } : {}) }),
        },
      ]);
    },
  );

  it('a refused step-up opens nothing and is recorded', async () => {
    const r = rig({ active: keyOf(), stepUpRefuses: true });
    await expect(r.service.export(admin, AGENT, 'anvil', 'bad')).rejects.toMatchObject({
      type: 'step_up_required',
    });
    expect(r.steps).not.toContain('loadKey');
    expect(r.records).toEqual([
      {
        action: 'signing_key.export.refused',
        metadata: expect.objectContaining({ reason: 'step_up_required', status: 403 }),
      },
    ]);
  });
});

describe('CustodyService.import', () => {
  it('replaces the active key (rotation recorded) and drops the replaced key from the loader', async () => {
    const old = keyOf();
    const r = rig({ active: old });
    const out = await r.service.import(admin, AGENT, 'anvil', 'rat_x', NEW_PK);
    expect(out.key.address).toBe(new Wallet(NEW_PK).address);
    expect(r.steps).toEqual(['chain', 'agent', 'active', 'addressTaken', 'stepUp', 'storeKey', 'importKey']);
    expect(r.records.map((x) => x.action)).toEqual(['signing_key.import', 'signing_key.rotated']);
    expect(r.forgotten).toEqual([old.id]);
    expect(JSON.stringify(r.records)).not.toContain(NEW_PK.slice(2));
  });

  it('a first import forgets nothing', async () => {
    const r = rig();
    await r.service.import(admin, AGENT, 'anvil', 'rat_x', NEW_PK);
    expect(r.forgotten).toEqual([]);
    expect(r.records.map((x) => x.action)).toEqual(['signing_key.import']);
  });

  it.each([
    ['a malformed key', {}, 'nope', 'invalid_argument', 'private_key'],
    ["another agent's key", { taken: true }, NEW_PK, 'conflict', 'private_key'],
    ['over a client_tss key', { active: keyOf({ custody: 'client_tss' }) }, NEW_PK, 'conflict', 'chain'],
    ['for an agent of another org', { agentMissing: true }, NEW_PK, 'not_found', undefined],
  ] as const)(
    'refuses %s before the step-up, stores nothing, recorded signing_key.import.refused',
    async (_what, opts, key, reason, field) => {
      const r = rig(opts);
      await expect(r.service.import(admin, AGENT, 'anvil', 'rat_x', key)).rejects.toBeDefined();
      expect(r.steps).not.toContain('stepUp');
      expect(r.steps).not.toContain('storeKey');
      expect(r.records).toEqual([
        {
          action: 'signing_key.import.refused',
          metadata: expect.objectContaining({ reason, ...(field ? { field } : {}) }),
        },
      ]);
      expect(JSON.stringify(r.records)).not.toContain(NEW_PK.slice(2));
      expect(r.forgotten).toEqual([]);
    },
  );
});
