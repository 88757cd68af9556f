import type {
  AgentPrincipal,
  Principal,
  RouterKeyClaim,
  UserPrincipal,
  UserRole,
} from './principal-types.js';
import { InvalidTokenError } from './token-errors.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const SUBJECT = /^(user|agent):(.+)$/;
const ROLES: readonly string[] = ['owner', 'admin', 'member'] satisfies UserRole[];
const MAX_ID_LENGTH = 128;

type Claims = Readonly<Record<string, unknown>>;

function invalid(): never {
  throw new InvalidTokenError('invalid_claims');
}

// Lower-cased so ids compare with === against what Postgres returns.
function uuid(value: unknown): string {
  if (typeof value !== 'string' || !UUID.test(value)) invalid();
  return value.toLowerCase();
}

function optionalUuid(value: unknown): string | undefined {
  return value === undefined ? undefined : uuid(value);
}

function id(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_ID_LENGTH) invalid();
  return value;
}

function stringArray(value: unknown): readonly string[] {
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) invalid();
  return Object.freeze([...(value as string[])]);
}

function optionalBoolean(value: unknown): boolean {
  if (value === undefined) return false;
  if (typeof value !== 'boolean') invalid();
  return value;
}

function optionalString(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') invalid();
  return value;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

function optionalCount(value: unknown, min: number): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) invalid();
  return value;
}

function routerKey(value: unknown): RouterKeyClaim | undefined {
  if (value === undefined) return undefined;
  if (!isPlainObject(value)) invalid();
  const maxConcurrentStreams = optionalCount(value.max_concurrent_streams, 1);
  const spendCapMicroUsd = optionalCount(value.spend_cap_micro_usd, 0);
  return Object.freeze({
    id: id(value.id),
    ...(maxConcurrentStreams !== undefined ? { maxConcurrentStreams } : {}),
    ...(spendCapMicroUsd !== undefined ? { spendCapMicroUsd } : {}),
  });
}

function timestamp(value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) invalid();
  return value;
}

interface BaseClaims {
  orgId: string;
  tokenId: string;
  issuedAt: number;
  expiresAt: number;
  issuer: string;
  sessionId?: string;
}

function userPrincipal(userId: string, c: Claims, base: BaseClaims): UserPrincipal {
  // SPEC.md §5.3: user tokens carry no agent-only grants; one that does was not minted by identity.
  if (c.proxy_config !== undefined || c.router_key !== undefined || c.scopes !== undefined) invalid();
  if (typeof c.role !== 'string' || !ROLES.includes(c.role)) invalid();
  return Object.freeze({
    kind: 'user',
    userId,
    ...base,
    role: c.role as UserRole,
    platformAdmin: optionalBoolean(c.platform_admin),
    requirePasskeyForVaults: optionalBoolean(c.pkv),
    amr: c.amr === undefined ? Object.freeze([]) : stringArray(c.amr),
  });
}

function agentPrincipal(agentId: string, c: Claims, base: BaseClaims): AgentPrincipal {
  // An agent is never a platform admin and has no org role; refuse rather than silently drop.
  if (c.platform_admin !== undefined || c.role !== undefined || c.pkv !== undefined) invalid();
  const vaultIds = Array.isArray(c.vault_ids) ? Object.freeze(c.vault_ids.map(uuid)) : invalid();
  if (c.proxy_config !== undefined && !isPlainObject(c.proxy_config)) invalid();
  const environment = optionalString(c.environment);
  const key = routerKey(c.router_key);
  const createdBy = optionalUuid(c.created_by);
  return Object.freeze({
    kind: 'agent',
    agentId,
    ...base,
    scopes: stringArray(c.scopes),
    vaultIds,
    intentsApiEnabled: optionalBoolean(c.intents_api_enabled),
    proxyEnabled: optionalBoolean(c.proxy_enabled),
    ...(environment !== undefined ? { environment } : {}),
    ...(c.proxy_config !== undefined ? { proxyConfig: deepFreeze(structuredClone(c.proxy_config)) } : {}),
    ...(key !== undefined ? { routerKey: key } : {}),
    ...(createdBy !== undefined ? { createdBy } : {}),
  });
}

/**
 * Maps the claims of a signature-checked access token to a principal; throws InvalidTokenError
 * when a claim is missing or malformed. Issuer, audience, `exp` and `nbf` are checked by the caller.
 */
export function principalFromClaims(c: Claims, nowSeconds: number, toleranceSeconds: number): Principal {
  if (c.token_use !== 'access') throw new InvalidTokenError('wrong_token_use');
  const issuedAt = timestamp(c.iat);
  const expiresAt = timestamp(c.exp);
  if (expiresAt <= issuedAt) invalid();
  if (issuedAt > nowSeconds + toleranceSeconds) throw new InvalidTokenError('issued_in_future');
  if (typeof c.iss !== 'string') invalid();
  const sessionId = c.sid === undefined ? undefined : id(c.sid);
  const base: BaseClaims = {
    orgId: uuid(c.org),
    tokenId: id(c.jti),
    issuedAt,
    expiresAt,
    issuer: c.iss,
    ...(sessionId !== undefined ? { sessionId } : {}),
  };
  const subject = typeof c.sub === 'string' ? SUBJECT.exec(c.sub) : null;
  if (!subject) invalid();
  const subjectId = uuid(subject[2]);
  return subject[1] === 'user' ? userPrincipal(subjectId, c, base) : agentPrincipal(subjectId, c, base);
}
