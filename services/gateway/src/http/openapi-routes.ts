import { Router } from 'express';
import { z } from 'zod/v4';
import { buildOpenApi } from './openapi.js';
import { type DeclaredRoute, declareRoute } from './routes.js';

const noGuards = { authenticated: [], human: [] };

/** `GET /v1/openapi.json`: the API's own description, built once from the declared routes. */
export function openApiRoutes(
  routes: readonly DeclaredRoute[],
  version = process.env['npm_package_version'] ?? '0.1.0',
): Router {
  const router = Router();
  let doc: Record<string, unknown> | undefined;
  declareRoute(
    router,
    noGuards,
    {
      method: 'get',
      path: '/v1/openapi.json',
      access: 'public',
      summary: 'This API described as OpenAPI 3.1',
      tag: 'meta',
      query: z.object({}),
      responses: {
        200: { description: 'The OpenAPI 3.1 document', schema: z.record(z.string(), z.unknown()) },
      },
    },
    (_req, res) => {
      // Built on first use, when every route group has been declared.
      doc ??= buildOpenApi(routes, version);
      res.setHeader('Cache-Control', 'public, max-age=300');
      res.json(doc);
    },
  );
  return router;
}
