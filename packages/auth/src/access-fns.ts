import { PermissionDeniedError } from '@custos/service-kit';
import type { AgentPrincipal, Principal, UserPrincipal } from './principal-types.js';

/** A signed-in human whose org role is `owner` or `admin`. */
export type OrgAdmin = UserPrincipal & { readonly role: 'owner' | 'admin' };

/** Whether the caller is a human owner or admin of the org its token names (agents never are). */
export function isOrgAdmin(p: Principal): p is OrgAdmin {
  return p.kind === 'user' && (p.role === 'owner' || p.role === 'admin');
}

/**
 * Refuses (403) anyone but a human owner or admin of the org; `what` names the action in the
 * refusal, e.g. `manage webhooks`.
 */
export function requireHumanAdmin(p: Principal, what: string): asserts p is OrgAdmin {
  if (p.kind !== 'user') throw new PermissionDeniedError(`only people may ${what}; agents may not`);
  if (!isOrgAdmin(p)) throw new PermissionDeniedError(`only org owners and admins may ${what}`);
}

/** Refuses (403) an agent: the action is for people only (spec §5.8). */
export function requireHuman(p: Principal, what: string): asserts p is UserPrincipal {
  if (p.kind !== 'user') throw new PermissionDeniedError(`only people may ${what}; agents may not`);
}

/** The actor of an audit record or a `created_by` column: who the caller is. */
export interface Actor {
  readonly actorType: 'user' | 'agent';
  readonly actorId: string;
}

/** The actor fields of an authenticated caller. */
export function actorOf(p: Principal): Actor {
  return p.kind === 'user'
    ? { actorType: 'user', actorId: p.userId }
    : { actorType: 'agent', actorId: (p as AgentPrincipal).agentId };
}

/** What a resource records about who made it. */
export interface CreatedBy {
  readonly createdBy: string;
  /** `user`, `agent` or `system`. */
  readonly createdByType: string;
}

/** Whether the caller made the resource (the same user or agent). */
export function isCreator(p: Principal, r: CreatedBy): boolean {
  const a = actorOf(p);
  return r.createdBy === a.actorId && r.createdByType === a.actorType;
}

/** Whether the caller made the resource or is an owner or admin of its org (vaults, shares, grants). */
export function isCreatorOrAdmin(p: Principal, r: CreatedBy): boolean {
  return isCreator(p, r) || isOrgAdmin(p);
}
