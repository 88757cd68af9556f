import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * What travels with one request: its id everywhere; the user's credential and address only from
 * the gateway to the service it calls (see docs/decisions.md, "What travels with a call").
 */
export interface RequestContext {
  requestId: string;
  /** The mesh identity of the service that called this one (from its verified client certificate). */
  caller?: string;
  /** The user's bearer JWT as the gateway received it; set only on calls the gateway made. */
  authorization?: string;
  /** The client's address as the gateway resolved it; set only on calls the gateway made. */
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
