import { AsyncLocalStorage } from 'node:async_hooks';

/** What travels with one request through every hop: its id and the caller's credential. */
export interface RequestContext {
  requestId: string;
  /** The caller's bearer JWT, exactly as received, forwarded to downstream services. */
  authorization?: string;
  /** The client's address as the gateway resolved it (for IP conditions and audit records). */
  clientIp?: string;
}

const storage = new AsyncLocalStorage<RequestContext>();

/** Runs `fn` with `ctx` as the current request context. */
export function runWithRequestContext<T>(ctx: RequestContext, fn: () => T): T {
  return storage.run(ctx, fn);
}

/** The current request context, if any. */
export function currentRequestContext(): RequestContext | undefined {
  return storage.getStore();
}
