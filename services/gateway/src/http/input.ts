import type { Request } from 'express';
import type { z } from 'zod/v4';
import { InvalidArgumentError } from '@custos/service-kit';

/** How deep a request body may nest (objects and arrays); deeper bodies get a 400. */
export const MAX_BODY_DEPTH = 32;
/** The most members one object or array of a body may have. */
export const MAX_BODY_MEMBERS = 10_000;

/** `a.b[2].c` for a path of keys and indexes; `body` for the root. */
export function fieldName(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out ? `.${String(key)}` : String(key);
  }
  return out || 'body';
}

/**
 * Checks a parsed JSON body before any schema sees it: nesting depth, member counts, and text that
 * cannot travel (NUL anywhere but in `nulAllowed` top-level fields, unpaired UTF-16 surrogates
 * everywhere, keys included). Throws a 400 naming the field at fault.
 */
export function checkJsonBody(value: unknown, nulAllowed: ReadonlySet<string> = new Set()): void {
  const walk = (v: unknown, path: PropertyKey[], depth: number): void => {
    if (typeof v === 'string') {
      checkText(v, path, nulAllowed.has(String(path[0])) && path.length === 1);
      return;
    }
    if (v === null || typeof v !== 'object') return;
    if (depth >= MAX_BODY_DEPTH) {
      throw new InvalidArgumentError(
        fieldName(path),
        `${fieldName(path)} nests deeper than ${MAX_BODY_DEPTH} levels`,
      );
    }
    if (Array.isArray(v)) {
      if (v.length > MAX_BODY_MEMBERS) {
        throw new InvalidArgumentError(
          fieldName(path),
          `${fieldName(path)} has more than ${MAX_BODY_MEMBERS} items`,
        );
      }
      v.forEach((item, i) => walk(item, [...path, i], depth + 1));
      return;
    }
    const keys = Object.keys(v);
    if (keys.length > MAX_BODY_MEMBERS) {
      throw new InvalidArgumentError(
        fieldName(path),
        `${fieldName(path)} has more than ${MAX_BODY_MEMBERS} members`,
      );
    }
    // JSON.parse keeps "__proto__" as an own key; it would vanish (or worse) on the way to a service.
    if (Object.hasOwn(v, '__proto__')) {
      throw new InvalidArgumentError(fieldName([...path, '__proto__']), '__proto__ is not a valid field');
    }
    for (const key of keys) {
      checkText(key, [...path, key], false);
      walk((v as Record<string, unknown>)[key], [...path, key], depth + 1);
    }
  };
  walk(value, [], 0);
}

/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function checkText(s: string, path: PropertyKey[], nulOk: boolean): void {
  if (!nulOk && s.includes('\u0000')) {
    throw new InvalidArgumentError(fieldName(path), `${fieldName(path)} must not contain NUL characters`);
  }
  if (LONE_SURROGATE.test(s)) {
    throw new InvalidArgumentError(
      fieldName(path),
      `${fieldName(path)} contains an unpaired UTF-16 surrogate`,
    );
  }
}

/** The first zod issue as a 400 problem that names the field (and, for unknown keys, the key). */
export function invalidArgumentOf(
  error: z.ZodError,
  where: 'body' | 'query' | 'params',
): InvalidArgumentError {
  // An unknown member is most often a misspelt field: name it before the "required" it causes.
  const issue = error.issues.find((i) => i.code === 'unrecognized_keys') ?? error.issues[0]!;
  if (issue.code === 'unrecognized_keys') {
    const field = fieldName([...issue.path, issue.keys[0]!]);
    const parent = issue.path.length
      ? fieldName(issue.path)
      : where === 'body'
        ? 'the request body'
        : `the ${where === 'query' ? 'query string' : 'path'}`;
    return new InvalidArgumentError(field, `${field} is not a field of ${parent}`);
  }
  const field = fieldName(issue.path);
  if (issue.code === 'invalid_type' && issue.input === undefined) {
    return new InvalidArgumentError(field, `${field} is required`);
  }
  return new InvalidArgumentError(field, `${field}: ${issue.message}`);
}

/** Parses `value` with `schema`, or throws a 400 naming the field. */
export function parseInput<S extends z.ZodType>(
  schema: S,
  value: unknown,
  where: 'body' | 'query' | 'params',
): z.output<S> {
  // reportInput: so a missing field (no input) can be told from a wrong one.
  const r = schema.safeParse(value, { reportInput: true });
  if (!r.success) throw invalidArgumentOf(r.error, where);
  return r.data;
}

/** Route params with Express 5's `*name` wildcards (arrays of segments) joined back into paths. */
export function paramsOf(req: Request): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.params as Record<string, unknown>)) {
    out[k] = Array.isArray(v) ? v.join('/') : String(v ?? '');
  }
  return out;
}

/** The JSON body as an object ({} when there is none), or a 400 naming `body`. */
export function bodyObject(req: Request): Record<string, unknown> {
  const b: unknown = req.body;
  if (b === undefined) return {};
  if (b === null || typeof b !== 'object' || Array.isArray(b)) {
    throw new InvalidArgumentError('body', 'body must be a JSON object');
  }
  return b as Record<string, unknown>;
}
