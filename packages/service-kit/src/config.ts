import { z } from 'zod';

/** Raised when the environment does not satisfy a service's configuration schema. */
export class ConfigError extends Error {
  constructor(readonly problems: ReadonlyArray<{ variable: string; reason: string }>) {
    super(`invalid configuration: ${problems.map((p) => `${p.variable}: ${p.reason}`).join('; ')}`);
    this.name = 'ConfigError';
  }
}

/**
 * The target schemes grpc-js registers (resolver-dns, resolver-ip, resolver-uds): `unix:50051` is
 * the socket file `50051` to it, not the host `unix`. Compared case-insensitively, to be safe.
 */
const GRPC_TARGET_SCHEMES = ['dns', 'ipv4', 'ipv6', 'unix'];

/** The host of a scheme-less `host:port` (`[v6]:port` included). */
const hostOf = (v: string) => v.slice(0, v.lastIndexOf(':'));

const blankToUndefined = (v: unknown) => (typeof v === 'string' && v.trim() === '' ? undefined : v);

/** Builders for environment variables; every one carries a description that the docs are checked against. */
export const env = {
  /** A free-form string. */
  string: (description: string) => z.preprocess(blankToUndefined, z.string()).describe(description),
  /** A TCP port number; 0 means "pick a free port" where the service allows it. */
  port: (description: string) =>
    z.preprocess(blankToUndefined, z.coerce.number().int().min(0).max(65535)).describe(description),
  /** A positive integer. */
  int: (description: string, min = 0, max = Number.MAX_SAFE_INTEGER) =>
    z.preprocess(blankToUndefined, z.coerce.number().int().min(min).max(max)).describe(description),
  /** `true`/`false` (also `1`/`0`, `yes`/`no`). */
  bool: (description: string) =>
    z
      .preprocess(blankToUndefined, z.enum(['true', 'false', '1', '0', 'yes', 'no']))
      .transform((v) => v === 'true' || v === '1' || v === 'yes')
      .describe(description),
  /** A URL whose scheme is one of `protocols`. */
  url: (description: string, protocols: string[]) =>
    z
      .preprocess(
        blankToUndefined,
        z.string().refine(
          (v) => {
            try {
              return protocols.includes(new URL(v).protocol.replace(/:$/, ''));
            } catch {
              return false;
            }
          },
          { message: `expected a ${protocols.join(' or ')} URL` },
        ),
      )
      .describe(description),
  /**
   * `host:port` of a peer service, or `dns:///host:port`. Both go through grpc-js's DNS resolver (a
   * target without a scheme it knows is read as `dns:<target>`), which returns every address the
   * name has: a headless Service's pods are balanced round-robin either way, and re-resolved on
   * reconnect; `dns:///` only says so. A host that grpc-js would read as a scheme (`unix:50051`,
   * `ipv4:…`, `ipv6:…`, `dns:50051` without `///`) is refused: it would name a socket file or an
   * address list, not the host.
   */
  address: (description: string) =>
    z
      .preprocess(
        blankToUndefined,
        z
          .string()
          .regex(/^(dns:\/\/\/)?(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, {
            message: 'expected host:port or dns:///host:port',
          })
          .refine((v) => v.startsWith('dns:///') || !GRPC_TARGET_SCHEMES.includes(hostOf(v).toLowerCase()), {
            message: `a host named ${GRPC_TARGET_SCHEMES.join(', ')} is read by gRPC as a scheme: use dns:///host:port`,
          }),
      )
      .describe(
        `${description} Also \`dns:///host:port\`; either form is resolved through DNS, and calls go round robin over every address of the name.`,
      ),
  /** One of a fixed set of values. */
  oneOf: <T extends [string, ...string[]]>(description: string, values: T) =>
    z.preprocess(blankToUndefined, z.enum(values)).describe(description),
  /** A secret key given as base64 of exactly `bytes` bytes; parsed to a Buffer. */
  base64Key: (description: string, bytes = 32) =>
    z
      .preprocess(
        blankToUndefined,
        z.string().refine(
          (v) => {
            const b = Buffer.from(v, 'base64');
            return b.length === bytes && b.toString('base64') === v.replace(/\s/g, '');
          },
          { message: `expected base64 of exactly ${bytes} bytes` },
        ),
      )
      .transform((v) => Buffer.from(v, 'base64'))
      .describe(description),
  /** A comma-separated list of strings (empty entries dropped). */
  list: (description: string) =>
    z
      .preprocess(blankToUndefined, z.string().optional())
      .transform((v) =>
        (v ?? '')
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
      )
      .describe(description),
};

/** A configuration schema: environment variable name → zod type (with a description). */
export type ConfigShape = Record<string, z.ZodTypeAny>;
/** The parsed configuration of a shape. */
export type ConfigOf<S extends ConfigShape> = z.infer<z.ZodObject<S>>;

/** Parses the environment once against `shape`, throwing a ConfigError that names every bad variable. */
export function loadConfig<S extends ConfigShape>(
  shape: S,
  source: NodeJS.ProcessEnv = process.env,
): ConfigOf<S> {
  // Blank counts as unset, so that defaults apply to `VAR=` as they do to a missing VAR.
  const cleaned: Record<string, string | undefined> = {};
  for (const key of Object.keys(shape)) cleaned[key] = blankToUndefined(source[key]) as string | undefined;
  const result = z.object(shape).safeParse(cleaned);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => ({
    variable: String(issue.path[0] ?? '(root)'),
    reason: issue.code === 'invalid_type' && issue.received === 'undefined' ? 'is required' : issue.message,
  }));
  throw new ConfigError(problems);
}

/** One documented variable of a configuration shape. */
export interface ConfigVariableDoc {
  variable: string;
  description: string;
  required: boolean;
  default?: string;
}

/** Lists the variables of a shape with their descriptions and defaults, for the configuration docs. */
export function describeConfig(shape: ConfigShape): ConfigVariableDoc[] {
  return Object.entries(shape).map(([variable, type]) => {
    const def = type._def as { typeName?: string; defaultValue?: () => unknown };
    const isDefault = def.typeName === 'ZodDefault';
    const fallback = isDefault ? def.defaultValue?.() : undefined;
    return {
      variable,
      description: type.description ?? '',
      required: !type.isOptional(),
      ...(isDefault ? { default: Array.isArray(fallback) ? fallback.join(',') : String(fallback) } : {}),
    };
  });
}
