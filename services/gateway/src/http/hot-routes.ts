import type { IncomingHttpHeaders } from 'node:http';
import type { ErrorRequestHandler, NextFunction, Request, RequestHandler, Response } from 'express';

/** A route the hot dispatcher serves: its compiled path and the stages Express runs for it. */
interface HotRoute {
  method: string;
  pattern: RegExp;
  names: readonly string[];
  wildcards: ReadonlySet<string>;
  /** The Express Route object, set as `req.route` as the router would. */
  route: unknown;
  stages: readonly RequestHandler[];
}

interface HotMatch {
  route: HotRoute;
  params: Record<string, string | string[]>;
}

// A segment of a request path the dispatcher takes as it is: no percent-encoding (Express would
// decode it), no query, no fragment, never empty (Express's optional trailing slash).
const SEGMENT = '[^/?#%]+';
const LITERAL = /^[A-Za-z0-9._~-]+$/;

/**
 * The routes declared `hot` (RouteSpec.hot), each compiled once to a regular expression over the
 * plain request paths it answers. A request the dispatcher is not sure about — another method,
 * encoded characters, a query, a body, a conditional GET — is left to Express.
 */
export class HotRoutes {
  private readonly routes: HotRoute[] = [];

  /** Adds a declared route (`:name` segments, a final `*name` wildcard, literal segments). */
  add(method: string, path: string, route: unknown, stages: readonly RequestHandler[]): void {
    const names: string[] = [];
    const wildcards = new Set<string>();
    const parts = path.split('/').slice(1);
    const source = parts.map((part, i) => {
      if (part.startsWith(':') && LITERAL.test(part.slice(1))) {
        names.push(part.slice(1));
        return `(${SEGMENT})`;
      }
      if (part.startsWith('*') && i === parts.length - 1 && LITERAL.test(part.slice(1))) {
        names.push(part.slice(1));
        wildcards.add(part.slice(1));
        return `(${SEGMENT}(?:/${SEGMENT})*)`;
      }
      if (!LITERAL.test(part)) throw new TypeError(`hot route ${path}: cannot compile segment "${part}"`);
      return part.replace(/\./g, '\\.');
    });
    this.routes.push({
      method: method.toUpperCase(),
      pattern: new RegExp(`^/${source.join('/')}$`),
      names,
      wildcards,
      route,
      stages,
    });
  }

  /** The hot route of a plain request, with its params as Express gives them; else undefined. */
  match(req: { method?: string; url?: string; headers: IncomingHttpHeaders }): HotMatch | undefined {
    if (this.routes.length === 0 || !isPlain(req.headers)) return undefined;
    const url = req.url ?? '';
    for (const r of this.routes) {
      if (r.method !== req.method) continue;
      const m = r.pattern.exec(url);
      if (!m) continue;
      const params: Record<string, string | string[]> = {};
      for (let i = 0; i < r.names.length; i++) {
        const name = r.names[i]!;
        // Express 5 gives a `*name` wildcard as its segments.
        params[name] = r.wildcards.has(name) ? m[i + 1]!.split('/') : m[i + 1]!;
      }
      return { route: r, params };
    }
    return undefined;
  }
}

/**
 * No body (so the JSON body checks and parser have nothing to do) and no conditional-GET header:
 * those rare requests take the Express path (the secret read answers them in full there too,
 * through sendJson), which keeps this one about the common case only.
 */
function isPlain(h: IncomingHttpHeaders): boolean {
  return (
    h['content-length'] === undefined &&
    h['transfer-encoding'] === undefined &&
    h['if-none-match'] === undefined &&
    h['if-modified-since'] === undefined
  );
}

/**
 * Runs `stages` in order as Express does: `next()` goes on, `next(err)` ends with the error, a
 * throw or a rejected promise is an error. `done` gets the error, or nothing when the last stage
 * called `next()`.
 */
function runStages(
  stages: readonly RequestHandler[],
  req: Request,
  res: Response,
  done: (err?: unknown) => void,
): void {
  let i = 0;
  const next: NextFunction = (err?: unknown) => {
    if (err) return done(err);
    const stage = stages[i++];
    if (!stage) return done();
    try {
      const ret = stage(req, res, next) as unknown;
      if (ret instanceof Promise)
        ret.then(undefined, (e: unknown) => next(e || new Error('Rejected promise')));
    } catch (e) {
      next(e);
    }
  };
  next();
}

/**
 * The first middleware of the app: a request for a hot route runs the app's own stages before
 * routing (`before`: request context, access log, rate limit), then that route's guards and
 * handler, as Express would run them, without Express matching it against every route declared
 * before it. Failures go to the app's error handler. Any other request goes on to Express.
 */
export function hotDispatcher(
  routes: HotRoutes,
  before: readonly RequestHandler[],
  onError: ErrorRequestHandler,
): RequestHandler {
  return (req, res, next) => {
    const hit = routes.match(req);
    if (!hit) return next();
    const fail = (err?: unknown) => {
      // The route's own stages always answer; only an error comes back here.
      if (err) onError(err, req, res, next);
    };
    runStages(before, req, res, (err) => {
      if (err) return fail(err);
      // What the router sets on a match.
      req.params = hit.params as Request['params'];
      (req as { route?: unknown }).route = hit.route.route;
      runStages(hit.route.stages, req, res, fail);
    });
  };
}
