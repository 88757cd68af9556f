import { z } from 'zod/v4';

// Building blocks of the route schemas. Route groups declare their own request and response
// shapes beside their routes; only what several groups share lives here.

/** A path id: any non-empty segment (services answer 404 for ids that do not exist or do not parse). */
export const idParam = z.string().min(1).max(200);

/** A UUID in a path, query or body. */
export const uuid = z.string().uuid();

/** An RFC 3339 date-time with a zone (what the API returns and accepts). */
export const dateTime = z.string().describe('RFC 3339 date-time');

/**
 * A wei amount (or any on-chain integer) as JSON carries it: a string (parsed by the owner of the
 * field) or a JSON number, taken only when it is a whole number JavaScript holds exactly (a larger
 * one would be rounded before anyone could check it); passed on as a decimal string.
 */
export const chainAmount = z.union([
  z.string().max(100),
  z
    .number()
    .nonnegative()
    .refine(Number.isSafeInteger, {
      message:
        'a JSON number must be a whole number up to 9007199254740991; give larger or fractional amounts as a string',
    })
    .transform((v) => String(v)),
]);

/** A non-negative whole JSON number JavaScript holds exactly (nonces, counts). */
export const safeCount = z
  .number()
  .nonnegative()
  .refine(Number.isSafeInteger, { message: 'must be a whole number up to 9007199254740991' });

/** Free-form JSON object (secret metadata, audit details, conditions). */
export const jsonObject = z.record(z.string(), z.unknown());

/** A whole number sent as a query string, in [min, max]. */
export function intQuery(min: number, max: number, description?: string) {
  const s = z
    .string()
    .regex(/^\d{1,10}$/, `must be an integer from ${min} to ${max}`)
    .transform(Number)
    .pipe(
      z
        .number()
        .int()
        .min(min, `must be an integer from ${min} to ${max}`)
        .max(max, `must be an integer from ${min} to ${max}`),
    );
  return description ? s.describe(description) : s;
}

/** `limit` and `offset` query parameters. */
export function pagingQuery(maxLimit: number, defaultLimit: number) {
  return {
    limit: intQuery(1, maxLimit, `Page size (default ${defaultLimit})`).optional(),
    offset: intQuery(0, 1_000_000_000, 'How many to skip').optional(),
  };
}

/** A string query parameter given at most once. */
export const queryString = z.string({ error: 'must be given once, as a string' });

/** A JSON body object whose unknown members are refused with a 400 naming them. */
export function bodyOf<T extends z.ZodRawShape>(shape: T) {
  return z.strictObject(shape);
}

/** `{}`-shaped responses with a message. */
export const MessageResponse = z.object({ message: z.string() });

/** A peer's reply message that proto3 marks optional but the peer always sends. */
export function must<T>(m: T | undefined, what: string): T {
  if (m === undefined) throw new Error(`the peer's reply has no ${what}`);
  return m;
}

/** An RFC 3339 date-time in a request (whether it lies in the future is the service's rule). */
export const isoDateTime = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/, 'must be an ISO 8601 date-time')
  .refine((v) => !Number.isNaN(Date.parse(v)), 'must be an ISO 8601 date-time')
  .describe('RFC 3339 date-time');
