import { z } from 'zod/v4';
import type { DeclaredRoute, ResponseSpec } from './routes.js';
import { AUTH_CONFIRM_HEADER, STEP_UP_ACCEPTED, stepUpHeaderDescription } from './step-up.js';

type JsonSchema = Record<string, unknown>;

/** The problem-details body (RFC 9457) every refusal carries. */
export const ProblemSchema = z
  .object({
    type: z.string().describe('A URI reference naming the problem type; `about:blank` when none applies'),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    field: z.string().optional().describe('The request field at fault'),
  })
  .catchall(z.unknown())
  .describe('Problem details (RFC 9457)');

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const out = z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'draft-2020-12' }) as JsonSchema;
  delete out['$schema'];
  return out;
}

/** `/v1/vaults/:vault_id/secrets/*path` → `/v1/vaults/{vault_id}/secrets/{path}` and its names. */
export function openApiPath(expressPath: string): { path: string; names: string[] } {
  const names: string[] = [];
  const path = expressPath.replace(/[:*]([A-Za-z_][A-Za-z0-9_]*)/g, (_m, name: string) => {
    names.push(name);
    return `{${name}}`;
  });
  return { path, names };
}

function shapeOf(schema: z.ZodType | undefined): Record<string, z.ZodType> | undefined {
  const shape = (schema as unknown as { shape?: Record<string, z.ZodType> } | undefined)?.shape;
  return shape && typeof shape === 'object' ? shape : undefined;
}

function parameters(route: DeclaredRoute): JsonSchema[] {
  const { names } = openApiPath(route.path);
  const paramShape = shapeOf(route.spec.params);
  const out: JsonSchema[] = names.map((name) => ({
    name,
    in: 'path',
    required: true,
    schema: paramShape?.[name] ? jsonSchema(paramShape[name], 'input') : { type: 'string' },
    ...(route.path.includes(`*${name}`) ? { description: 'The rest of the path; may contain `/`' } : {}),
  }));
  const queryShape = shapeOf(route.spec.query);
  for (const [name, schema] of Object.entries(queryShape ?? {})) {
    const s = jsonSchema(schema, 'input');
    out.push({
      name,
      in: 'query',
      required: !schema.safeParse(undefined).success,
      schema: s,
      ...(typeof s['description'] === 'string' ? { description: s['description'] } : {}),
    });
  }
  for (const [name, description] of Object.entries(route.spec.headers ?? {})) {
    out.push({ name, in: 'header', required: false, schema: { type: 'string' }, description });
  }
  if (route.spec.stepUp) {
    const when = route.spec.stepUpWhen;
    out.push({
      name: AUTH_CONFIRM_HEADER,
      in: 'header',
      required: !when,
      schema: { type: 'string' },
      description: (when ? `Only ${when.description}. ` : '') + stepUpHeaderDescription(route.spec.stepUp),
    });
  }
  return out;
}

const problemContent = {
  'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } },
};

/** A declared response; a refusal (4xx, 5xx) without a schema of its own is a problem-details body. */
function responseObject(status: string, r: ResponseSpec): JsonSchema {
  if (!r.schema && Number(status) >= 400) return { description: r.description, content: problemContent };
  if (!r.schema) return { description: r.description };
  return {
    description: r.description,
    content: { [r.contentType ?? 'application/json']: { schema: jsonSchema(r.schema, 'output') } },
  };
}

const problemRef = { $ref: '#/components/responses/Problem' };

function operation(route: DeclaredRoute): JsonSchema {
  const spec = route.spec;
  const method = route.method.toLowerCase();
  const responses: JsonSchema = {};
  for (const [status, r] of Object.entries(spec.responses)) responses[status] = responseObject(status, r);
  responses['400'] = problemRef;
  if (route.access !== 'public') {
    responses['401'] = route.spec.stepUp
      ? {
          description: `Not signed in, or the step-up challenge: \`step_up_required\` with \`purpose\` (\`${route.spec.stepUp}\`) and \`accepted\` (${STEP_UP_ACCEPTED.map((a) => `\`${a}\``).join(', ')})`,
          content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
        }
      : problemRef;
    responses['403'] = problemRef;
  }
  if (method !== 'get' && method !== 'delete') responses['415'] = problemRef;
  // A route that declares its own 429 (a refusal worth naming, as `account_locked`) keeps it.
  responses['429'] ??= problemRef;
  responses['default'] = problemRef;
  const op: JsonSchema = {
    operationId: `${method}${openApiPath(route.path)
      .path.replace(/[{}]/g, '')
      .split(/[^A-Za-z0-9]+/)
      .filter(Boolean)
      .map((w) => w[0]!.toUpperCase() + w.slice(1))
      .join('')}`,
    summary: spec.summary,
    tags: [spec.tag],
    security: route.access === 'public' ? [] : [{ bearer: [] }],
    ...(route.access === 'human' ? { description: 'For people only: agents are refused with 403.' } : {}),
    parameters: parameters(route),
    responses,
  };
  if (spec.body) {
    op['requestBody'] = {
      required: true,
      content: { 'application/json': { schema: jsonSchema(spec.body, 'input') } },
    };
  }
  return op;
}

/** The OpenAPI 3.1 document of every declared route. */
export function buildOpenApi(routes: readonly DeclaredRoute[], version: string): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const route of routes) {
    const { path } = openApiPath(route.path);
    (paths[path] ??= {})[route.method.toLowerCase()] = operation(route);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Custos API',
      version,
      description:
        'Secret management and signing for software agents. Errors are problem details (RFC 9457).',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    servers: [{ url: '/' }],
    paths,
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
      schemas: { Problem: jsonSchema(ProblemSchema, 'output') },
      responses: {
        Problem: {
          description: 'A refusal or failure, as problem details',
          content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
        },
      },
    },
  };
}
