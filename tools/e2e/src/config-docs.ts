import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { type ConfigShape, describeConfig } from '@custos/service-kit';
import { SERVICES, type ServiceName } from './mesh';

const DOC = path.resolve(__dirname, '..', '..', '..', 'docs', 'configuration.md');
const START = '<!-- BEGIN GENERATED: variables (tools/e2e/src/config-docs.ts) -->';
const END = '<!-- END GENERATED: variables -->';

function shapeOf(service: ServiceName): ConfigShape {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (require(`@custos/${service}/config`) as { configShape: ConfigShape }).configShape;
}

/** The variable tables of docs/configuration.md, rendered from each service's config schema. */
export function renderVariableTables(): string {
  const parts: string[] = [];
  for (const service of SERVICES) {
    parts.push(`### ${service}`, '', '| Variable | Required | Default | Description |', '|---|---|---|---|');
    for (const v of describeConfig(shapeOf(service))) {
      const def = v.default === undefined ? '' : v.default === '' ? '(empty)' : `\`${v.default}\``;
      parts.push(
        `| \`${v.variable}\` | ${v.required ? 'yes' : 'no'} | ${def} | ${v.description.replace(/\|/g, '\\|')} |`,
      );
    }
    parts.push('');
  }
  return parts.join('\n');
}

/** Table rows compared cell by cell, so Prettier's column padding does not count as drift. */
export function normalizeTables(markdown: string): string {
  return markdown
    .split('\n')
    .map((line) => {
      const t = line.trim();
      if (!t.startsWith('|')) return t;
      if (/^\|[\s|:-]+\|$/.test(t)) return '|---|';
      return t
        .split(/(?<!\\)\|/)
        .map((c) => c.trim())
        .join('|');
    })
    .filter((l) => l !== '')
    .join('\n');
}

/** The generated section currently in docs/configuration.md. */
export function readDocumentedTables(): string {
  const text = fs.readFileSync(DOC, 'utf8');
  const a = text.indexOf(START);
  const b = text.indexOf(END);
  if (a < 0 || b < 0) throw new Error(`docs/configuration.md lacks the generated-section markers`);
  return text.slice(a + START.length, b).trim();
}

/** Rewrites the generated section of docs/configuration.md. */
export function writeDocumentedTables(): void {
  const text = fs.readFileSync(DOC, 'utf8');
  const a = text.indexOf(START);
  const b = text.indexOf(END);
  fs.writeFileSync(
    DOC,
    `${text.slice(0, a + START.length)}\n\n${renderVariableTables().trim()}\n\n${text.slice(b)}`,
  );
  // The repository's prettier (a root devDependency) lays the tables out as `prettier --check` wants.
  const prettier = path.resolve(__dirname, '..', '..', '..', 'node_modules', '.bin', 'prettier');
  execFileSync(prettier, ['--write', DOC], { stdio: 'ignore' });
}
