import type { NextFunction, Request, RequestHandler, Response, Router } from 'express';
import type { z } from 'zod/v4';
import { InvalidArgumentError } from '@custos/service-kit';
import type { HotRoutes } from './hot-routes.js';
import { bodyObject, checkJsonBody, paramsOf, parseInput } from './input.js';
import { sendProblem } from './problem.js';
import { type StepUpPurpose, authConfirmOf, stepUpChallenge } from './step-up.js';

/** Who may call a route: anyone, any signed-in principal, or humans only (spec §5.8). */
export type Access = 'public' | 'authenticated' | 'human';

/** An HTTP method a route can be declared for. */
export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

/** One documented response of a route: its description and, unless empty, its body schema. */
export interface ResponseSpec {
  description: string;
  schema?: z.ZodType;
  /** Content type of the body; `application/json` unless given. */
  contentType?: string;
}

/**
 * The HTTP shape of a route, declared once beside it: params, query and body are checked before the
 * handler runs (a 400 naming the field otherwise) and, with the responses, make the OpenAPI document.
 */
export interface RouteSpec<
  P extends z.ZodType = z.ZodType,
  Q extends z.ZodType = z.ZodType,
  B extends z.ZodType = z.ZodType,
> {
  method: Method;
  /** Express path; `:name` is a segment, `*name` the rest of the path (joined back with `/`). */
  path: string;
  access: Access;
  /** One line for the OpenAPI document. */
  summary: string;
  /** OpenAPI tag (the resource group). */
  tag: string;
  params?: P;
  query?: Q;
  /** The JSON body; routes without one accept an empty body only. */
  body?: B;
  /** Success responses by status; every route also documents the problem-details refusals. */
  responses: Record<number, ResponseSpec>;
  /** Top-level body fields whose text may contain NUL (values that are encrypted, never stored as text). */
  nulAllowed?: readonly string[];
  /** Request headers the route reads, for the document (e.g. `X-Auth-Confirm`). */
  headers?: Record<string, string>;
  /**
   * The step-up purpose the route needs (SPEC.md §5.9): a request without `X-Auth-Confirm` is
   * answered 401 `step_up_required` before any service is called; with one, the handler forwards
   * it and the owning service checks it (403 `step_up_required` when it fails).
   */
  stepUp?: StepUpPurpose;
  /**
   * With `stepUp`: the step-up is needed only for the requests this answers true for (e.g. an agent
   * update that touches a guardrail), checked after the input is; the document then says when.
   */
  stepUpWhen?: { applies: (input: RouteInput<P, Q, B>) => boolean; description: string };
  /**
   * A GET that reveals a secret value or spends a count (a secret read, a share opening): HEAD on
   * it is 405. Express would run the GET for a HEAD and drop the body, so a link checker or a
   * monitoring probe would spend a read and leave an audit record of a value nobody received.
   */
  noHead?: boolean;
  /**
   * Also served by the precompiled dispatcher (hot-routes.ts) for the plain requests of a hot
   * load: same stages, same handler, without Express walking every route before it.
   */
  hot?: boolean;
}

/** What a handler receives: the checked params, query and body. */
export interface RouteInput<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType> {
  params: z.output<P>;
  query: z.output<Q>;
  body: z.output<B>;
}

/** A declared route, as the OpenAPI document and the 405 handler see it. */
export interface DeclaredRoute {
  method: string;
  path: string;
  access: Access;
  spec: RouteSpec;
}

/** Every route the gateway serves, with its access level; tests compare the public ones to spec §5.11. */
export const ROUTE_TABLE: DeclaredRoute[] = [];

/**
 * The access guards every route group receives, and the app's table of hot routes (routes
 * declared `hot` are added to it; without one they are served by Express only).
 */
export type Guards = { authenticated: RequestHandler[]; human: RequestHandler[]; hot?: HotRoutes };

type Handler<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType> = (
  req: Request,
  res: Response,
  input: RouteInput<P, Q, B>,
) => Promise<void> | void;

function record(route: DeclaredRoute): void {
  if (!ROUTE_TABLE.some((r) => r.method === route.method && r.path === route.path)) ROUTE_TABLE.push(route);
}

function guardsFor(guards: Guards, access: Access): RequestHandler[] {
  return access === 'public' ? [] : access === 'human' ? guards.human : guards.authenticated;
}

/**
 * Declares a route: records it in ROUTE_TABLE, puts the access guards in front of it, checks the
 * request against the spec's schemas (after the guards, so a caller without access learns nothing
 * about the shape) and hands the handler typed input.
 */
export function declareRoute<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType>(
  router: Router,
  guards: Guards,
  spec: RouteSpec<P, Q, B>,
  handler: Handler<P, Q, B>,
): void {
  record({
    method: spec.method.toUpperCase(),
    path: spec.path,
    access: spec.access,
    spec: spec as unknown as RouteSpec,
  });
  const nulAllowed = new Set(spec.nulAllowed ?? []);
  /** The checked input of a request, or a 400 naming the field at fault. */
  const inputOf = (req: Request): RouteInput<P, Q, B> => {
    const params = paramsOf(req);
    // Path segments and query values reach services as text too: the same rules as bodies.
    checkJsonBody(params);
    checkJsonBody(req.query);
    const raw = bodyObject(req);
    checkJsonBody(raw, nulAllowed);
    return {
      params: spec.params ? parseInput(spec.params, params, 'params') : params,
      query: spec.query ? parseInput(spec.query, req.query, 'query') : {},
      body: spec.body ? parseInput(spec.body, raw, 'body') : emptyBody(raw),
    } as RouteInput<P, Q, B>;
  };
  const stages: RequestHandler[] = [
    ...guardsFor(guards, spec.access),
    (req: Request, res: Response, next: NextFunction) => {
      let input: RouteInput<P, Q, B>;
      try {
        input = inputOf(req);
      } catch (err) {
        return next(err);
      }
      // After the input checks, so the retry with a credential does not meet a 400 the first
      // request could have told.
      if (spec.stepUp && authConfirmOf(req) === '' && (!spec.stepUpWhen || spec.stepUpWhen.applies(input)))
        return sendProblem(res, stepUpChallenge(spec.stepUp));
      Promise.resolve(handler(req, res, input)).catch(next);
    },
  ];
  // What `router[method](path, ...stages)` does, keeping the Route: the hot dispatcher sets it as
  // `req.route`, as Express would.
  const route = router.route(spec.path);
  if (spec.method === 'get' && spec.noHead) {
    // Registered on the route, so Express does not fall back to the GET for a HEAD.
    route.head((req: Request, res: Response) => {
      const allow = [...new Set(ROUTE_TABLE.filter((r) => r.path === spec.path).map((r) => r.method))]
        .sort()
        .join(', ');
      res.setHeader('Allow', allow);
      sendProblem(res, {
        type: 'about:blank',
        title: 'Method Not Allowed',
        status: 405,
        detail: `HEAD is not allowed on ${req.path}: a GET here reads a value; allowed: ${allow}`,
      });
    });
  }
  route[spec.method](...stages);
  if (spec.hot && guards.hot) guards.hot.add(spec.method, spec.path, route, stages);
}

function emptyBody(raw: Record<string, unknown>): Record<string, never> {
  const first = Object.keys(raw)[0];
  if (first !== undefined) {
    throw new InvalidArgumentError(
      first,
      `${first} is not a field of the request body (this route takes no body)`,
    );
  }
  return {};
}
