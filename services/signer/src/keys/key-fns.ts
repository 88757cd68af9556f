import { InvalidArgumentError, isUuid } from '@custos/service-kit';
import { keyNameOf } from '../chains/chain-fns.js';
import type { ChainRecord } from '../chains/chain-types.js';
import { type ChainAdapter, addressOn } from './chain-adapter.js';
import type { SigningKeyRecord } from './key-types.js';

/** An agent id from a path: a UUID, lower-cased. */
export function agentIdOf(raw: string): string {
  if (!isUuid(raw)) throw new InvalidArgumentError('agent_id', 'must be a UUID');
  return raw.toLowerCase();
}

/**
 * The custody a create asks for: empty or `server`, or `client_tss` (SPEC §2.8): a two-party key of
 * which signer makes and seals only its own share, the user's share being wrapped on the user's
 * device (client shares). `passkey_owner` is a smart-account label and is not made here: only
 * server custody and client_tss keys are.
 */
export function creatableCustody(raw: string): 'server' | 'client_tss' {
  const v = raw.trim();
  if (v === '' || v === 'server') return 'server';
  if (v === 'client_tss') return 'client_tss';
  if (v === 'passkey_owner') {
    throw new InvalidArgumentError(
      'custody',
      'passkey_owner keys are not created on the server path; only server custody (and client_tss) keys are',
    );
  }
  throw new InvalidArgumentError('custody', 'must be server, client_tss or passkey_owner');
}

/** The metadata of a key's audit record and event: what a reader may know, never the private half. */
export function keyDetails(k: SigningKeyRecord): Record<string, unknown> {
  return {
    agent_id: k.agentId,
    chain: keyNameOf(k.family),
    curve: k.curve,
    address: k.address || null,
    key_version: k.keyVersion,
    custody: k.custody,
  };
}

/** Active versions first, then by chain and newest version. */
export function sortKeys(keys: SigningKeyRecord[]): SigningKeyRecord[] {
  return [...keys].sort(
    (a, b) =>
      Number(b.isActive) - Number(a.isActive) ||
      a.family.localeCompare(b.family) ||
      b.keyVersion - a.keyVersion,
  );
}

/**
 * The key as an answer about `chain`: its address in the chain's network form (Bitcoin `bcrt1` on
 * a regtest chain, Cardano `addr_test` on preprod); the stored and listed form is mainnet's.
 */
export function onNetwork(adapter: ChainAdapter, k: SigningKeyRecord, chain: ChainRecord): SigningKeyRecord {
  return k.address ? { ...k, address: addressOn(adapter, k, chain) } : k;
}
