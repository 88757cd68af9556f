import { api, quickUser } from '../src/api';
import { sharedMesh, type Mesh } from '../src/mesh';

// Malformed bodies against every write route of the real mesh, from the gateway's own OpenAPI
// document: each must be a 4xx problem naming the field, never a 5xx, never a crash.

type Schema = {
  type?: string | string[];
  properties?: Record<string, Schema>;
  additionalProperties?: unknown;
};
type Operation = {
  security?: unknown[];
  requestBody?: { content: Record<string, { schema: Schema }> };
};

const UUID = '00000000-0000-4000-8000-000000000000';

/** The corpus: each case puts one bad value into one field; `field` is where the 400 must point. */
function corpus(fields: string[]): Array<{ name: string; raw: string; field: string; nulCase?: boolean }> {
  // Written as text: JSON.stringify itself runs out of stack on a 5,000-deep value.
  const deep = (n: number) => `${'['.repeat(n)}1${']'.repeat(n)}`;
  const out: Array<{ name: string; raw: string; field: string; nulCase?: boolean }> = [];
  const j = (v: unknown) => JSON.stringify(v);
  for (const f of fields) {
    out.push({ name: `${f}: 5,000-deep array`, raw: `{${j(f)}:${deep(5000)}}`, field: f });
    out.push({ name: `${f}: NUL`, raw: j({ [f]: 'a\u0000b' }), field: f, nulCase: true });
    out.push({ name: `${f}: unpaired high surrogate`, raw: j({ [f]: 'a\ud800b' }), field: f });
    out.push({ name: `${f}: unpaired low surrogate`, raw: j({ [f]: '\udc00' }), field: f });
    out.push({ name: `${f}: nested NUL key`, raw: j({ [f]: { 'k\u0000': 1 } }), field: f });
  }
  out.push({ name: 'unknown member', raw: j({ zz_not_a_field: 1 }), field: 'zz_not_a_field' });
  return out;
}

describe('malformed bodies on every write route', () => {
  let mesh: Mesh;
  let token: string;
  let doc: { paths: Record<string, Record<string, Operation>> };

  beforeAll(async () => {
    // The shared mesh: its global teardown fails the run if any of its services exited.
    mesh = await sharedMesh();
    token = (await quickUser(mesh)).token;
    const r = await fetch(`${mesh.baseUrl}/v1/openapi.json`);
    doc = (await r.json()) as typeof doc;
  });

  it('answers each with a 4xx problem naming the field, and every service still serves', async () => {
    const failures: string[] = [];
    let sent = 0;
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        if (!['post', 'put', 'patch'].includes(method)) continue;
        const schema = op.requestBody?.content['application/json']?.schema;
        const fields = Object.keys(schema?.properties ?? {});
        const url = path.replace(/\{path\}|\{rest\}/g, 'a/b/1').replace(/\{[^}]+\}/g, UUID);
        for (const c of corpus(fields.length ? fields : ['name'])) {
          // Free-form objects (metadata) take any key: an unknown top-level member is the only
          // case a route without a closed schema may pass on to its service.
          if (c.field === 'zz_not_a_field' && schema?.additionalProperties !== false) continue;
          const r = await api(mesh, method.toUpperCase(), url, { token, raw: c.raw });
          sent++;
          const field = String(r.body['field'] ?? '');
          const ok =
            r.status >= 400 &&
            r.status < 500 &&
            (r.status !== 400 ||
              field === c.field ||
              field.startsWith(`${c.field}.`) ||
              field.startsWith(`${c.field}[`));
          // A NUL in a field that may hold one (a secret value) reaches the service, which may
          // answer with its own refusal of the rest of the body: any 4xx will do there.
          const nulPassed = c.nulCase && r.status >= 400 && r.status < 500;
          if (!ok && !nulPassed)
            failures.push(
              `${method.toUpperCase()} ${path} ${c.name} → ${r.status} ${JSON.stringify(r.body)}`,
            );
        }
      }
    }
    expect(sent).toBeGreaterThan(100);
    expect(failures).toEqual([]);
    const health = await fetch(`${mesh.baseUrl}/v1/health`);
    expect(health.status).toBe(200);
  });
});
