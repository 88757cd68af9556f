/** One look at GET /v1/health. */
export interface HealthCheck {
  /** HTTP 200: every service serves. */
  ok: boolean;
  status?: number;
  /** The parsed body (the gateway names each service's state). */
  body?: unknown;
  text?: string;
  /** Why nothing answered (ECONNREFUSED, TimeoutError, ...). */
  error?: string;
}

/** Asks the gateway at `baseUrl` for /v1/health once. */
export async function checkHealth(baseUrl: string, timeoutMs = 2000): Promise<HealthCheck> {
  // Not AbortSignal.timeout: its timer would keep a process that is done alive until it fires.
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(new DOMException('timed out', 'TimeoutError')), timeoutMs);
  try {
    const res = await fetch(`${baseUrl}/v1/health`, { signal: abort.signal });
    const text = await res.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    return { ok: res.status === 200, status: res.status, body, text };
  } catch (err) {
    const e = err as { cause?: { code?: string }; name?: string };
    return { ok: false, error: e?.cause?.code ?? e?.name ?? String(err) };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Polls /v1/health until it answers 200. Resolves to that answer; rejects after `timeoutMs` (the
 * message says what the last answer was), or as soon as `giveUp` returns a reason.
 */
export async function waitForHealth(
  baseUrl: string,
  opts: { timeoutMs?: number; intervalMs?: number; giveUp?: () => string | undefined } = {},
): Promise<HealthCheck> {
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await checkHealth(baseUrl);
    if (r.ok) return r;
    const reason = opts.giveUp?.();
    if (reason) throw new Error(`${baseUrl}/v1/health did not answer 200: ${reason}`);
    if (Date.now() >= deadline) {
      const last = r.error ?? `HTTP ${r.status} ${(r.text ?? '').slice(0, 300)}`;
      throw new Error(`${baseUrl}/v1/health did not answer 200 within ${timeoutMs} ms (last: ${last})`);
    }
    await new Promise((res) => setTimeout(res, opts.intervalMs ?? 200));
  }
}

const OK_WORDS = new Set(['ok', 'serving', 'up', 'healthy', 'pass']);

function isOk(v: unknown): boolean {
  if (v === true) return true;
  if (typeof v === 'string') return OK_WORDS.has(v.toLowerCase());
  if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return isOk(o['status'] ?? o['state'] ?? o['ok']);
  }
  return false;
}

function statusText(v: unknown): string {
  if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return String(o['status'] ?? o['state'] ?? JSON.stringify(v));
  }
  return String(v);
}

/** "name: STATUS" for each dependency a health body reports as not serving, or null if it lists none. */
export function notServingFrom(body: unknown): string[] | null {
  if (!body || typeof body !== 'object') return null;
  for (const key of ['services', 'checks', 'components', 'dependencies']) {
    const v = (body as Record<string, unknown>)[key];
    if (Array.isArray(v)) {
      return v
        .filter((x) => !isOk(x))
        .map(
          (x: { name?: unknown; service?: unknown }) =>
            `${String(x?.name ?? x?.service ?? '?')}: ${statusText(x)}`,
        );
    }
    if (v && typeof v === 'object') {
      return Object.entries(v)
        .filter(([, x]) => !isOk(x))
        .map(([k, x]) => `${k}: ${statusText(x)}`);
    }
  }
  return null;
}
