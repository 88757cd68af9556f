/**
 * Parses `OTEL_RESOURCE_ATTRIBUTES` as the OpenTelemetry specification defines it: comma-separated
 * `key=value` pairs, keys and values percent-decoded, surrounding spaces trimmed. Like the
 * reference SDKs, a malformed list (a pair without `=`, an empty key, a bad percent escape) is
 * discarded whole: a half-applied list would label traces in a way nobody asked for. Returns the
 * attributes, or an error naming what is wrong (never the values, which an operator may have
 * filled with anything).
 */
export function parseResourceAttributes(
  text: string | undefined,
): { attributes: Record<string, string> } | { error: string } {
  const attributes: Record<string, string> = {};
  if (text === undefined || text.trim() === '') return { attributes };
  const pairs = text.split(',');
  for (const [i, raw] of pairs.entries()) {
    const pair = raw.trim();
    // A trailing comma (or two in a row) is tolerated, as SDKs do.
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    if (eq <= 0) return { error: `pair ${i + 1} is not key=value` };
    let key: string;
    let value: string;
    try {
      key = decodeURIComponent(pair.slice(0, eq)).trim();
      value = decodeURIComponent(pair.slice(eq + 1).trim());
    } catch {
      return { error: `pair ${i + 1} has an invalid percent-encoding` };
    }
    if (key === '') return { error: `pair ${i + 1} has an empty key` };
    attributes[key] = value;
  }
  return { attributes };
}

/** What names the process in traces: the service's name unless the standard variables say otherwise. */
export interface ResourceSettings {
  /** The built-in service name (e.g. `vault-crypto`). */
  serviceName: string;
  /** OTEL_SERVICE_NAME. */
  otelServiceName?: string | undefined;
  /** Attributes parsed from OTEL_RESOURCE_ATTRIBUTES. */
  attributes?: Record<string, string>;
}

/**
 * The resource attributes of a process: OTEL_RESOURCE_ATTRIBUTES merged under `service.name`, which
 * is OTEL_SERVICE_NAME when set, else a `service.name` in the attributes, else the built-in name —
 * the precedence the OpenTelemetry specification gives these variables.
 */
export function resourceAttributesOf(s: ResourceSettings): Record<string, string> {
  const attributes = s.attributes ?? {};
  const serviceName = s.otelServiceName?.trim() || attributes['service.name'] || s.serviceName;
  return { ...attributes, 'service.name': serviceName };
}
