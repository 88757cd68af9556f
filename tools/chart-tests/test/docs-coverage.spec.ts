// docs/deployment.md covers every value the chart takes: each leaf of values.yaml (a key whose
// schema is not an object of fixed properties: a scalar, a list, a free map) is named in
// docs/deployment.md or in a docs page it links to. A leaf counts as named when its full path
// appears, or when one paragraph or table row names its parent path and the key itself (the docs'
// shorthand "`nats.tls.caSecret` / `caSecretKey`", "`existingSecret(Key)`"). The per-service keys
// are written with <service> (or <name> for services.<name>).
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import yaml from 'js-yaml';
import { SERVICES } from './facts';
import { type Json, chartDir, repoRoot } from './helm';

const schema = JSON.parse(readFileSync(path.join(chartDir, 'values.schema.json'), 'utf8')) as Json;
const values = yaml.load(readFileSync(path.join(chartDir, 'values.yaml'), 'utf8')) as Json;

/** Keys documented as one value (a Kubernetes structure given as it is). */
const WHOLE = ['resources', 'namespaceSelector', 'podSelector', 'seccompProfile', 'capabilities'];
/** Maps keyed by service name. */
const PER_SERVICE_MAPS = ['services', 'serviceCredentials', 'users', 'existingSecrets'];

function resolve(node: Json): Json {
  let n = node;
  while (n && n.$ref) n = schema.definitions[String(n.$ref).replace('#/definitions/', '')];
  if (n && n.allOf && n.allOf.length === 1 && !n.properties) return resolve(n.allOf[0]);
  return n;
}

/** The schema node of a key under `parent` (following properties, then additionalProperties). */
function childSchema(parent: Json, key: string): Json {
  const p = resolve(parent);
  if (!p) return undefined;
  return resolve(
    p.properties?.[key] ?? (typeof p.additionalProperties === 'object' ? p.additionalProperties : undefined),
  );
}

/** Leaf paths of values.yaml, with per-service map keys written as <service> / <name>. */
function leaves(value: Json, node: Json, at: string[], out: Set<string>): void {
  const s = resolve(node);
  const isBranch =
    value &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    s?.properties &&
    Object.keys(value).length > 0 &&
    !WHOLE.includes(at[at.length - 1] ?? '');
  if (!isBranch) {
    out.add(at.join('.'));
    return;
  }
  for (const [k, v] of Object.entries(value)) {
    const isService =
      (SERVICES as string[]).includes(k) && PER_SERVICE_MAPS.includes(at[at.length - 1] ?? '');
    const name = isService ? (at[at.length - 1] === 'services' ? '<name>' : '<service>') : k;
    leaves(v, childSchema(s, k), [...at, name], out);
  }
}

/** docs/deployment.md and the docs pages it links to, split into paragraphs and table rows. */
function docBlocks(): string[] {
  const main = readFileSync(path.join(repoRoot, 'docs', 'deployment.md'), 'utf8');
  const linked = [...main.matchAll(/\]\(([a-z0-9-]+\.md)(#[^)]*)?\)/g)].map((m) => m[1]!);
  const texts = [main];
  for (const file of new Set(linked)) {
    const p = path.join(repoRoot, 'docs', file);
    if (existsSync(p)) texts.push(readFileSync(p, 'utf8'));
  }
  return texts.flatMap((text) =>
    text
      .split(/\n\s*\n/)
      .flatMap((block) => (block.trimStart().startsWith('|') ? block.split('\n') : [block])),
  );
}

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\<>]/g, '\\$&');
}

function named(leaf: string, blocks: string[]): boolean {
  const parts = leaf.split('.');
  const key = parts[parts.length - 1]!;
  const parent = parts.slice(0, -1).join('.');
  const keyRe = new RegExp(`(^|[^A-Za-z0-9_])${escape(key)}([^A-Za-z0-9_]|$)`);
  const shortRe = key.endsWith('Key') ? new RegExp(`${escape(key.slice(0, -3))}\\(Key\\)`) : undefined;
  return blocks.some(
    (b) =>
      b.includes(leaf) ||
      (parent !== '' && b.includes(parent) && (keyRe.test(b) || (shortRe?.test(b) ?? false))),
  );
}

describe('docs/deployment.md covers every value', () => {
  const all = new Set<string>();
  leaves(values, schema, [], all);
  const blocks = docBlocks();

  it('walks a plausible number of leaves (the walker itself works)', () => {
    expect(all.size).toBeGreaterThan(150);
    expect(all).toContain('postgres.serviceCredentials.<service>.role');
    expect(all).toContain('services.<name>.grpcPort');
    expect(all).toContain('networkPolicy.dns.to');
  });

  it('names each one in docs/deployment.md or a page it links to', () => {
    const missing = [...all].filter((leaf) => !named(leaf, blocks)).sort();
    expect(missing).toEqual([]);
  });

  it('the check fails for a key the docs do not name', () => {
    expect(named('postgres.noSuchValueAnywhere', blocks)).toBe(false);
    expect(named('audit.hmacKey', blocks)).toBe(true);
  });
});
