// The image and dev-loop files that sit beside the chart: the nine Dockerfiles stay copies of
// tools/docker/service.Dockerfile, and skaffold.yaml builds and wires one image per service.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import yaml from 'js-yaml';
import { SERVICES } from './facts';
import { ofKind, renderChart, repoRoot, type Json } from './helm';

const read = (file: string) => readFileSync(path.join(repoRoot, file), 'utf8');

describe('Dockerfiles', () => {
  const shared = read('tools/docker/service.Dockerfile');

  it('the shared Dockerfile builds with pnpm 10.34.9 on node:20-bookworm-slim and runs as uid 10001', () => {
    expect(shared).toMatch(/^ARG NODE_IMAGE=node:20-bookworm-slim$/m);
    expect(shared).toMatch(/^FROM \$\{NODE_IMAGE\} AS build$/m);
    expect(shared).toMatch(/^FROM \$\{NODE_IMAGE\} AS runtime$/m);
    expect(shared).toContain('pnpm@10.34.9');
    expect(shared).toContain('pnpm install --frozen-lockfile');
    expect(shared).toContain('pnpm turbo run build --filter="@custos/${SERVICE}..."');
    expect(shared).toMatch(/pnpm --filter "@custos\/\$\{SERVICE\}" deploy --prod .*\/out/);
    expect(shared).toContain('COPY --from=build /out /app');
    expect(shared).toMatch(/^USER 10001(:10001)?$/m);
    expect(shared).toMatch(/^CMD \["node", "dist\/main\.js"\]$/m);
    expect(shared.match(/^ARG SERVICE$/gm)).toHaveLength(2);
  });

  it.each(SERVICES)(
    'services/%s/Dockerfile is the shared one with SERVICE defaulting to its name',
    (service) => {
      const expected = shared.replace(/^ARG SERVICE$/gm, `ARG SERVICE=${service}`);
      // On failure: cp tools/docker/service.Dockerfile over it and set the two `ARG SERVICE=` lines.
      expect(read(`services/${service}/Dockerfile`)).toBe(expected);
    },
  );

  it('.dockerignore keeps build outputs, dependencies and local tools out of the context', () => {
    const patterns = read('.dockerignore')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    for (const p of ['**/node_modules', '**/dist', '**/coverage', '.git', '.custos-dev', '.tools']) {
      expect(patterns).toContain(p);
    }
  });
});

describe('skaffold.yaml', () => {
  const config = yaml.load(read('skaffold.yaml')) as Json;

  it('has one docker artifact per service, built from the repository root', () => {
    expect(config.apiVersion).toMatch(/^skaffold\/v4beta\d+$/);
    const artifacts: Json[] = config.build.artifacts;
    expect(artifacts.map((a) => a.image).sort()).toEqual(SERVICES.map((s) => `custos-${s}`).sort());
    for (const a of artifacts) {
      const service = a.image.replace(/^custos-/, '');
      expect(a.context).toBe('.');
      expect(a.docker.dockerfile).toBe(`services/${service}/Dockerfile`);
      expect(existsSync(path.join(repoRoot, a.docker.dockerfile))).toBe(true);
    }
  });

  it('deploys charts/custos with each built image wired into its service', () => {
    const [releaseCfg, ...more] = config.deploy.helm.releases;
    expect(more).toEqual([]);
    expect(releaseCfg.chartPath).toBe('charts/custos');
    expect(existsSync(path.join(repoRoot, releaseCfg.chartPath, 'Chart.yaml'))).toBe(true);
    const templates: Record<string, string> = releaseCfg.setValueTemplates;
    for (const service of SERVICES) {
      const sanitized = `custos_${service.replace(/-/g, '_')}`;
      expect(templates[`services.${service}.image.reference`]).toBe(
        `{{.IMAGE_FULLY_QUALIFIED_${sanitized}}}`,
      );
    }
    expect(Object.keys(templates)).toHaveLength(SERVICES.length);
  });

  it('its values render the chart (a value the chart newly requires breaks `skaffold dev` here first)', () => {
    const values: Record<string, unknown> = config.deploy.helm.releases[0].setValues;
    const args = Object.entries(values).flatMap(([k, v]) => ['--set', `${k}=${String(v)}`]);
    const objects = renderChart(args);
    expect(ofKind(objects, 'Deployment')).toHaveLength(SERVICES.length);
  });

  it('accepts the development-only settings knowingly: the local KMS and trust-auth database roles', () => {
    const values: Record<string, unknown> = config.deploy.helm.releases[0].setValues;
    expect(values['kms.allowLocal']).toBe(true);
    expect(values['postgres.allowPasswordlessRoles']).toBe(true);
  });
});
