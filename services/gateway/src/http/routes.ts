import type { NextFunction, Request, RequestHandler, Response, Router } from 'express';

/** Who may call a route: anyone, any signed-in principal, or humans only (spec §5.8). */
export type Access = 'public' | 'authenticated' | 'human';

/** Every route the gateway serves, with its access level; tests compare the public ones to spec §5.11. */
export const ROUTE_TABLE: Array<{ method: string; path: string; access: Access }> = [];

type Handler = (req: Request, res: Response) => Promise<void> | void;

/**
 * Declares a route: records it in ROUTE_TABLE and puts the authentication (and, for human-only
 * routes, the human guard) middleware in front of the handler, after the global pipeline stages.
 */
export function declareRoute(
  router: Router,
  guards: { authenticated: RequestHandler[]; human: RequestHandler[] },
  method: 'get' | 'post' | 'put' | 'patch' | 'delete',
  path: string,
  access: Access,
  handler: Handler,
): void {
  if (!ROUTE_TABLE.some((r) => r.method === method.toUpperCase() && r.path === path)) {
    ROUTE_TABLE.push({ method: method.toUpperCase(), path, access });
  }
  const chain = access === 'public' ? [] : access === 'human' ? guards.human : guards.authenticated;
  router[method](path, ...chain, (req: Request, res: Response, next: NextFunction) => {
    Promise.resolve(handler(req, res)).catch(next);
  });
}
