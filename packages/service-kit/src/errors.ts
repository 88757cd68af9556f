import { status as GrpcStatus } from '@grpc/grpc-js';

/** The kinds of failure a Custos service reports, each with its gRPC code and HTTP status. */
export const ERROR_KINDS = {
  invalid_argument: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400, title: 'Bad Request' },
  unauthenticated: { grpc: GrpcStatus.UNAUTHENTICATED, http: 401, title: 'Unauthorized' },
  payment_required: { grpc: GrpcStatus.FAILED_PRECONDITION, http: 402, title: 'Payment Required' },
  permission_denied: { grpc: GrpcStatus.PERMISSION_DENIED, http: 403, title: 'Forbidden' },
  not_found: { grpc: GrpcStatus.NOT_FOUND, http: 404, title: 'Not Found' },
  conflict: { grpc: GrpcStatus.ALREADY_EXISTS, http: 409, title: 'Conflict' },
  gone: { grpc: GrpcStatus.FAILED_PRECONDITION, http: 410, title: 'Gone' },
  unsupported_media_type: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 415, title: 'Unsupported Media Type' },
  unprocessable: { grpc: GrpcStatus.FAILED_PRECONDITION, http: 422, title: 'Unprocessable Content' },
  rate_limited: { grpc: GrpcStatus.RESOURCE_EXHAUSTED, http: 429, title: 'Too Many Requests' },
  internal: { grpc: GrpcStatus.INTERNAL, http: 500, title: 'Internal Server Error' },
  // Not UNAVAILABLE: clients retry that code, and a handler that reports a dependency outage may
  // already have changed state (a retried key rotation would rotate twice).
  unavailable: { grpc: GrpcStatus.ABORTED, http: 503, title: 'Service Unavailable' },
} as const;

/** One of the ERROR_KINDS names. */
export type ErrorKind = keyof typeof ERROR_KINDS;

/** Fields of a CustosError beyond its kind; `detail` must never contain a secret value. */
export interface CustosErrorInit {
  detail: string;
  /** Problem-details `type`; `about:blank` unless a specific type applies. */
  type?: string;
  title?: string;
  /** The request field at fault. */
  field?: string;
  /** Extra problem-details members, e.g. `reason_code`. */
  extensions?: Record<string, string>;
}

/** Base of every domain error; the gRPC edge and the gateway render it, nothing else leaks. */
export class CustosError extends Error {
  readonly type: string;
  readonly title: string;
  readonly detail: string;
  readonly field: string | undefined;
  readonly extensions: Record<string, string>;

  constructor(
    readonly kind: ErrorKind,
    init: CustosErrorInit,
  ) {
    super(init.detail);
    this.name = new.target.name;
    this.type = init.type ?? 'about:blank';
    this.title = init.title ?? ERROR_KINDS[kind].title;
    this.detail = init.detail;
    this.field = init.field;
    this.extensions = init.extensions ?? {};
  }

  /** The HTTP status this error is answered with. */
  get httpStatus(): number {
    return ERROR_KINDS[this.kind].http;
  }
}

/** A request field is missing or malformed. */
export class InvalidArgumentError extends CustosError {
  constructor(field: string, detail: string) {
    super('invalid_argument', { field, detail });
  }
}

/** The caller's credential is missing, invalid, expired or revoked. */
export class UnauthenticatedError extends CustosError {
  constructor(detail = 'missing or invalid credentials') {
    super('unauthenticated', { detail });
  }
}

/** The caller is known but may not do this. */
export class PermissionDeniedError extends CustosError {
  constructor(detail: string, init: Omit<CustosErrorInit, 'detail'> = {}) {
    super('permission_denied', { ...init, detail });
  }
}

/** The named resource does not exist (or is not visible to the caller). */
export class NotFoundError extends CustosError {
  constructor(resource: string, id?: string) {
    super('not_found', { detail: id ? `${resource} ${id} was not found` : `${resource} was not found` });
  }
}

/** The request conflicts with the current state (duplicate name, request still running). */
export class ConflictError extends CustosError {
  constructor(detail: string, field?: string) {
    super('conflict', { detail, ...(field ? { field } : {}) });
  }
}

/** A peer service or dependency cannot be reached. */
export class UnavailableError extends CustosError {
  constructor(detail: string) {
    super('unavailable', { detail });
  }
}

/** The client sent too many requests. */
export class RateLimitedError extends CustosError {
  constructor(readonly retryAfterSeconds: number) {
    super('rate_limited', {
      detail: `rate limit exceeded; retry after ${retryAfterSeconds} s`,
      extensions: { retry_after: String(retryAfterSeconds) },
    });
  }
}

/** The resource existed but can no longer be used (an expired or exhausted secret): HTTP 410. */
export class GoneError extends CustosError {
  constructor(detail: string) {
    super('gone', { detail });
  }
}

/** Creating one more of `resource` would pass the org's tier cap (403 `resource_limit_exceeded`). */
export class ResourceLimitExceededError extends CustosError {
  constructor(resource: 'vaults' | 'secrets' | 'agents', limit: number, plan: string) {
    super('permission_denied', {
      type: 'resource_limit_exceeded',
      detail: `the ${plan} plan allows at most ${limit} ${resource}`,
      extensions: { resource, limit: String(limit), plan },
    });
  }
}
