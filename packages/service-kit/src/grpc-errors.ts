import { Metadata, status as GrpcStatus, type ServiceError, type StatusObject } from '@grpc/grpc-js';
import { ErrorDetail } from '@custos/proto/custos/common/v1/errors';
import { CustosError, ERROR_KINDS, type ErrorKind, UnavailableError } from './errors.js';
import { isDependencyOutage } from './dependency-errors.js';
import { describeError, type Logger } from './logger.js';

const DETAIL_KEY = 'custos-error-bin';

/** Converts any thrown value into the status a gRPC handler answers; unknown errors become INTERNAL. */
export function toGrpcStatus(err: unknown, logger?: Logger): Partial<StatusObject> {
  if (err instanceof CustosError) {
    // An error may carry operator-only facts in its message (an endpoint, an ARN) beside the
    // detail it answers with: those go to the log, never to the caller.
    if (err.message !== err.detail) logger?.warn({ kind: err.kind, reason: err.message }, err.detail);
    const metadata = new Metadata();
    metadata.set(
      DETAIL_KEY,
      Buffer.from(
        ErrorDetail.encode({
          type: err.type,
          title: err.title,
          detail: err.detail,
          field: err.field ?? '',
          extensions: err.extensions,
          kind: err.kind,
        }).finish(),
      ),
    );
    return { code: ERROR_KINDS[err.kind].grpc, details: err.detail, metadata };
  }
  if (isDependencyOutage(err)) {
    // Postgres, NATS or Redis away (a restart, a failover): 503 and asked again, never 500.
    logger?.warn({ err: describeError(err) }, 'a dependency is unavailable; request refused');
    return toGrpcStatus(new UnavailableError('a dependency of the service is unavailable; retry shortly'));
  }
  logger?.error({ err: describeError(err) }, 'unhandled error in gRPC handler');
  return { code: GrpcStatus.INTERNAL, details: 'internal error' };
}

/** Rebuilds the CustosError a peer service raised, or describes a transport failure. */
export function fromGrpcError(err: unknown): CustosError {
  const e = err as Partial<ServiceError>;
  const raw = e.metadata?.get(DETAIL_KEY)[0];
  if (raw instanceof Buffer) {
    const d = ErrorDetail.decode(raw);
    const kind = (d.kind in ERROR_KINDS ? d.kind : 'internal') as ErrorKind;
    return new CustosError(kind, {
      type: d.type || 'about:blank',
      title: d.title,
      detail: d.detail,
      ...(d.field ? { field: d.field } : {}),
      extensions: d.extensions,
    });
  }
  switch (e.code) {
    case GrpcStatus.UNAVAILABLE:
    case GrpcStatus.DEADLINE_EXCEEDED:
    case GrpcStatus.CANCELLED:
      // The peer's address stays internal: callers see which kind of failure, not where.
      return new UnavailableError('an internal service is unavailable; retry shortly');
    case GrpcStatus.UNAUTHENTICATED:
      return new CustosError('unauthenticated', { detail: 'missing or invalid credentials' });
    case GrpcStatus.PERMISSION_DENIED:
      return new CustosError('permission_denied', { detail: 'permission denied' });
    case GrpcStatus.NOT_FOUND:
      return new CustosError('not_found', { detail: 'not found' });
    default:
      return new CustosError('internal', { detail: 'internal error' });
  }
}
