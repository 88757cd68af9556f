import { randomBytes } from 'node:crypto';
import { waitFor } from '@custos/service-kit/testing';
import { SERVICES, startMesh, type Mesh } from '../src/mesh';
import { startOtlpReceiver } from '../src/otlp-receiver';

describe('the mesh: nine processes behind the gateway', () => {
  let mesh: Mesh;
  let otlp: Awaited<ReturnType<typeof startOtlpReceiver>>;

  beforeAll(async () => {
    otlp = await startOtlpReceiver();
    mesh = await startMesh({
      extraEnv: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_BSP_SCHEDULE_DELAY: '100' },
    });
  });

  afterAll(async () => {
    await mesh?.stop();
    await otlp?.close();
  });

  it('answers GET /v1/health with ok when every service serves', async () => {
    const res = await fetch(`${mesh.baseUrl}/v1/health`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { status: string; services: Record<string, string> };
    expect(body.status).toBe('ok');
    expect(Object.keys(body.services).sort()).toEqual([...SERVICES].sort());
    expect(Object.values(body.services).every((s) => s === 'serving')).toBe(true);
  });

  it('reports the KMS provider at GET /v1/health/hsm', async () => {
    const res = await fetch(`${mesh.baseUrl}/v1/health/hsm`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: 'ok', provider: 'local' });
  });

  it('answers GET /v1/health/hsm whatever Authorization header a probe sends', async () => {
    const res = await fetch(`${mesh.baseUrl}/v1/health/hsm`, {
      headers: { authorization: 'Bearer stale.or.junk' },
    });
    expect(res.status).toBe(200);
  });

  it('traces one health request through the gateway and all nine services under one trace id', async () => {
    const traceId = randomBytes(16).toString('hex');
    const callerSpanId = randomBytes(8).toString('hex');
    const res = await fetch(`${mesh.baseUrl}/v1/health`, {
      headers: { traceparent: `00-${traceId}-${callerSpanId}-01` },
    });
    expect(res.status).toBe(200);
    // The gateway's server span ends after its client spans, so once it has been exported they have
    // too (on a busy machine they may come in an earlier batch than the services' spans, or a later).
    const services = await waitFor(async () => {
      const trace = otlp.spans.filter((s) => s.traceId === traceId);
      const seen = new Set(trace.map((s) => s.service));
      const gatewayDone = trace.some((s) => s.service === 'gateway' && s.parentSpanId === callerSpanId);
      return seen.size === SERVICES.length && gatewayDone ? seen : undefined;
    }, 20000);
    expect([...services].sort()).toEqual([...SERVICES].sort());
    // Each service's server span is a child of a gateway client span of the same trace.
    const spans = otlp.spans.filter((s) => s.traceId === traceId);
    const gatewayIds = new Set(spans.filter((s) => s.service === 'gateway').map((s) => s.spanId));
    for (const s of spans.filter((x) => x.service !== 'gateway'))
      expect(gatewayIds.has(s.parentSpanId)).toBe(true);
  });

  it('answers unknown routes and malformed JSON with problem details', async () => {
    const missing = await fetch(`${mesh.baseUrl}/v1/no-such-thing`);
    expect(missing.status).toBe(404);
    expect(missing.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await missing.json()).toMatchObject({ type: 'about:blank', title: 'Not Found', status: 404 });

    const bad = await fetch(`${mesh.baseUrl}/v1/vaults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"name": ',
    });
    expect(bad.status).toBe(400);
    const body = (await bad.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ status: 400, title: 'Bad Request', field: 'body' });
    expect(JSON.stringify(body)).not.toMatch(/at \w+ \(|node_modules|SyntaxError/);
  });

  it('turns /v1/health to 503 naming a service that was killed', async () => {
    await mesh.kill('audit');
    const res = await fetch(`${mesh.baseUrl}/v1/health`);
    expect(res.status).toBe(503);
    const body = (await res.json()) as {
      detail: string;
      unavailable: string[];
      services: Record<string, string>;
    };
    expect(body.unavailable).toEqual(['audit']);
    expect(body.detail).toContain('audit');
    expect(body.services['audit']).toBe('unreachable');
    expect(body.services['policy']).toBe('serving');
  });

  it('stops a service cleanly on SIGTERM', async () => {
    const code = await mesh.kill('billing', 'SIGTERM');
    expect(code).toBe(0);
    const lines = mesh.output.get('billing') ?? [];
    expect(lines.some((l) => l.includes('"msg":"stopped"'))).toBe(true);
  });
});
