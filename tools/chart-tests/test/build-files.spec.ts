// The image and dev-loop files that sit beside the chart: the nine Dockerfiles stay copies of
// tools/docker/service.Dockerfile on one Node LTS image, docker-bake.hcl builds the nine images the
// chart pulls, and skaffold.yaml deploys the dev dependencies, then builds (each image from its own
// inputs only) and wires one image per service.
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import yaml from 'js-yaml';
import { evaluateBake, HclError, parseHcl } from './bake-hcl';
import { SERVICES } from './facts';
import {
  named,
  objectName,
  ofKind,
  renderChart,
  repoRoot,
  serviceEnv,
  type Json,
  type K8sObject,
} from './helm';
import { validationErrors } from './validate';

const read = (file: string) => readFileSync(path.join(repoRoot, file), 'utf8');

describe('Dockerfiles', () => {
  const shared = read('tools/docker/service.Dockerfile');

  it('the shared Dockerfile builds with pnpm 10.34.9 on a pinned Node 24 LTS image and runs as uid 10001', () => {
    // A full version (24.x.y), never a moving tag; both stages use it.
    expect(shared).toMatch(/^ARG NODE_IMAGE=node:24\.\d+\.\d+-bookworm-slim$/m);
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

  it("the deployed folder leaves out pnpm's install record, whose wall-clock time and order differ per build", () => {
    // One instruction per entry, continuation lines joined. The removal is part of the deploy
    // instruction itself, so no later edit can slip a step between the two that reads or keeps it.
    const instructions = shared
      .replace(/\\\n/g, ' ')
      .split('\n')
      .filter((l) => /^[A-Z]+ /.test(l));
    const deploy = instructions.filter((l) => / deploy --prod /.test(l));
    expect(deploy).toHaveLength(1);
    expect(deploy[0]).toMatch(
      /^RUN .* deploy --prod .* \/out +&& rm -f \/out\/node_modules\/\.modules\.yaml$/,
    );
  });

  it.each(SERVICES)(
    'services/%s/Dockerfile is the shared one with SERVICE defaulting to its name',
    (service) => {
      const expected = shared.replace(/^ARG SERVICE$/gm, `ARG SERVICE=${service}`);
      // On failure: cp tools/docker/service.Dockerfile over it and set the two `ARG SERVICE=` lines.
      expect(read(`services/${service}/Dockerfile`)).toBe(expected);
    },
  );

  it('every FROM of the ten Dockerfiles uses the one NODE_IMAGE, whose default is the same in all', () => {
    const files = ['tools/docker/service.Dockerfile', ...SERVICES.map((s) => `services/${s}/Dockerfile`)];
    const defaults = new Set<string>();
    for (const file of files) {
      const text = read(file);
      const froms = text.match(/^FROM .*$/gm) ?? [];
      expect(froms).toEqual(['FROM ${NODE_IMAGE} AS build', 'FROM ${NODE_IMAGE} AS runtime']);
      const args = text.match(/^ARG NODE_IMAGE=(.*)$/gm) ?? [];
      expect(args).toHaveLength(1);
      defaults.add(args[0]!);
    }
    expect(defaults.size).toBe(1);
  });

  it("package.json engines still accept Node 20.19 (local development) and the image's Node 24", () => {
    const engines: string = JSON.parse(read('package.json')).engines.node;
    expect(engines).toMatch(/>=20\.19/);
    expect(engines).toMatch(/>=22|>=24/);
  });

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

/** The folders of the workspace packages `service` depends on, transitively (dev dependencies too). */
function workspaceDependencies(service: string): string[] {
  const dirs = new Map<string, string>();
  for (const group of ['packages', 'services', 'tools']) {
    for (const d of readdirSync(path.join(repoRoot, group))) {
      const file = path.join(repoRoot, group, d, 'package.json');
      if (existsSync(file)) dirs.set(JSON.parse(readFileSync(file, 'utf8')).name, `${group}/${d}`);
    }
  }
  const depsOf = (name: string): string[] => {
    const pkg = JSON.parse(read(`${dirs.get(name)}/package.json`));
    return Object.keys({ ...pkg.dependencies, ...pkg.devDependencies }).filter((k) => dirs.has(k));
  };
  const seen = new Set<string>();
  const todo = [`@custos/${service}`];
  while (todo.length > 0) {
    for (const d of depsOf(todo.pop()!)) {
      if (!seen.has(d)) {
        seen.add(d);
        todo.push(d);
      }
    }
  }
  return [...seen].map((n) => dirs.get(n)!).sort();
}

describe('docker-bake.hcl', () => {
  const bake = evaluateBake(read('docker-bake.hcl'));
  const chart = yaml.load(read('charts/custos/Chart.yaml')) as Json;

  it('its default group is exactly the nine services', () => {
    expect([...bake.groups['default']!].sort()).toEqual([...SERVICES].sort());
  });

  it.each(SERVICES)(
    'target %s builds the shared Dockerfile with SERVICE=<name> as ${REGISTRY}/custos-<name>:${TAG}',
    (service) => {
      const t = bake.targets[service]!;
      expect(t.context).toBe('.');
      expect(t.dockerfile).toBe('tools/docker/service.Dockerfile');
      expect(t.target).toBe('runtime');
      expect(t.args['SERVICE']).toBe(service);
      expect(t.tags).toEqual([`registry.example.com/custos/custos-${service}:${chart.appVersion}`]);
      const other = evaluateBake(read('docker-bake.hcl'), { REGISTRY: 'r.test/x', TAG: '9.9.9' });
      expect(other.targets[service]!.tags).toEqual([`r.test/x/custos-${service}:9.9.9`]);
    },
  );

  it("TAG defaults to the chart's appVersion and REGISTRY to its image.registry: the defaults pull what bake pushes", () => {
    expect(bake.variables['TAG']).toBe(String(chart.appVersion));
    const values = yaml.load(read('charts/custos/values.yaml')) as Json;
    expect(bake.variables['REGISTRY']).toBe(values.image.registry);
  });

  it('every image carries the OCI labels, an SBOM and max provenance, for amd64 and arm64, reproducible timestamps', () => {
    for (const service of SERVICES) {
      const t = bake.targets[service]!;
      expect(Object.keys(t.labels).sort()).toEqual(
        expect.arrayContaining([
          'org.opencontainers.image.licenses',
          'org.opencontainers.image.revision',
          'org.opencontainers.image.source',
          'org.opencontainers.image.version',
        ]),
      );
      expect(t.labels['org.opencontainers.image.version']).toBe(String(chart.appVersion));
      expect(t.labels['org.opencontainers.image.licenses']).toBe(JSON.parse(read('package.json')).license);
      expect(t.attest).toEqual(['type=sbom', 'type=provenance,mode=max']);
      expect(t.platforms).toEqual(['linux/amd64', 'linux/arm64']);
      expect(t.args['SOURCE_DATE_EPOCH']).toBe('');
      expect(t.output).toEqual(['type=image,rewrite-timestamp=true']);
    }
    const pinned = evaluateBake(read('docker-bake.hcl'), {
      SOURCE_DATE_EPOCH: '1700000000',
      REVISION: 'abc',
    });
    expect(pinned.targets['gateway']!.args).toEqual({ SOURCE_DATE_EPOCH: '1700000000', SERVICE: 'gateway' });
    expect(pinned.targets['gateway']!.labels['org.opencontainers.image.revision']).toBe('abc');
  });
});

describe('the bake file reader', () => {
  it('reads blocks, attributes, lists, objects, interpolation, inherits and split()', () => {
    const src = [
      '# comment',
      'variable "V" { default = "x" }',
      'variable "L" {',
      '  default = "a,b"',
      '}',
      'group "default" { targets = ["t"] }',
      'target "_base" {',
      '  args = { A = "1", B = "2" } // trailing comment',
      '  platforms = split(",", L)',
      '}',
      'target "t" {',
      '  inherits = ["_base"]',
      '  args = {',
      '    B = "3"',
      '    "C" = "${V}-$${V}"',
      '  }',
      '  tags = ["r/${V}:1",]',
      '}',
    ].join('\n');
    const b = evaluateBake(src);
    expect(b.targets['t']).toMatchObject({
      args: { A: '1', B: '3', C: 'x-${V}' },
      platforms: ['a', 'b'],
      tags: ['r/x:1'],
    });
    expect(evaluateBake(src, { V: 'y' }).targets['t']!.tags).toEqual(['r/y:1']);
  });

  it('refuses what it does not understand instead of misreading it', () => {
    expect(() => parseHcl('target "t" { tags = ["${join(",", X)}"] }')).toThrow(HclError);
    expect(() => parseHcl('x = <<EOT\nhi\nEOT\n')).toThrow(HclError);
    expect(() => parseHcl('target "t" { a = "1" b = "2" }')).toThrow(HclError);
    expect(() => parseHcl('target "t" {')).toThrow(HclError);
    expect(() => evaluateBake('target "t" { cache-from = ["x"] }')).toThrow(/not read by this reader/);
    expect(() => evaluateBake('target "t" { tags = ["${NOPE}"] }')).toThrow(/unknown variable NOPE/);
    expect(() => evaluateBake('target "t" { inherits = ["t"] }')).toThrow(/cycle/);
  });
});

describe('skaffold.yaml', () => {
  const config = yaml.load(read('skaffold.yaml')) as Json;

  it('has one artifact per service, built from the repository root by its own Dockerfile', () => {
    expect(config.apiVersion).toBe('skaffold/v4beta11');
    const artifacts: Json[] = config.build.artifacts;
    expect(artifacts.map((a) => a.image).sort()).toEqual(SERVICES.map((s) => `custos-${s}`).sort());
    for (const a of artifacts) {
      const service = a.image.replace(/^custos-/, '');
      expect(a.context).toBe('.');
      expect(a.custom.buildCommand).toBe(`sh tools/skaffold/build-image.sh ${service}`);
      expect(existsSync(path.join(repoRoot, `services/${service}/Dockerfile`))).toBe(true);
    }
    expect(existsSync(path.join(repoRoot, 'tools/skaffold/build-image.sh'))).toBe(true);
  });

  describe('tools/skaffold/build-image.sh', () => {
    // The script runs for real; `docker` is a stand-in on PATH that records its arguments, since
    // what the script decides is which build command (and which output) it asks for.
    let bin: string;
    beforeAll(() => {
      bin = mkdtempSync(path.join(os.tmpdir(), 'custos-build-image-'));
      writeFileSync(path.join(bin, 'docker'), '#!/bin/sh\nprintf \'%s\\n\' "$@" > "$DOCKER_ARGS_FILE"\n');
      chmodSync(path.join(bin, 'docker'), 0o755);
    });
    afterAll(() => rmSync(bin, { recursive: true, force: true }));

    const run = (env: Record<string, string>, service = 'identity') => {
      const argsFile = path.join(bin, 'args');
      rmSync(argsFile, { force: true });
      const r = spawnSync('sh', ['tools/skaffold/build-image.sh', service], {
        cwd: repoRoot,
        encoding: 'utf8',
        env: { PATH: `${bin}:${process.env['PATH']}`, DOCKER_ARGS_FILE: argsFile, ...env },
      });
      const args = existsSync(argsFile) ? readFileSync(argsFile, 'utf8').trimEnd().split('\n') : [];
      return { status: r.status, stderr: r.stderr, args };
    };

    it('loads the image into the local store when skaffold does not push (a docker-container builder keeps it in its cache otherwise)', () => {
      const r = run({ IMAGE: 'custos-identity:abc', PUSH_IMAGE: 'false' });
      expect(r.status).toBe(0);
      expect(r.args.slice(0, 2)).toEqual(['buildx', 'build']);
      expect(r.args).toContain('--load');
      expect(r.args).not.toContain('--push');
      expect(r.args).toEqual(
        expect.arrayContaining(['--file', 'services/identity/Dockerfile', '--tag', 'custos-identity:abc']),
      );
      expect(r.args.at(-1)).toBe('.');
      expect(run({ IMAGE: 'custos-identity:abc' }).args).toContain('--load');
    });

    it('pushes when skaffold pushes, for the platforms it asks for', () => {
      const r = run(
        { IMAGE: 'r.test/custos-audit:abc', PUSH_IMAGE: 'true', PLATFORMS: 'linux/amd64,linux/arm64' },
        'audit',
      );
      expect(r.status).toBe(0);
      expect(r.args).toContain('--push');
      expect(r.args).not.toContain('--load');
      expect(r.args[r.args.indexOf('--platform') + 1]).toBe('linux/amd64,linux/arm64');
      expect(r.args[r.args.indexOf('--tag') + 1]).toBe('r.test/custos-audit:abc');
    });

    it('refuses an unknown service and a missing IMAGE before building', () => {
      expect(run({ IMAGE: 'x' }, 'nope')).toMatchObject({ status: 2, args: [] });
      expect(run({}).args).toEqual([]);
      expect(run({}).status).not.toBe(0);
    });
  });

  it.each(SERVICES)(
    'custos-%s is rebuilt by changes to its own inputs only: its service, its workspace packages, the build files',
    (service) => {
      const artifact = (config.build.artifacts as Json[]).find((a) => a.image === `custos-${service}`);
      const paths: string[] = artifact.custom.dependencies.paths;
      expect(paths).toContain(`services/${service}/**`);
      for (const other of SERVICES.filter((s) => s !== service)) {
        expect(paths.filter((p) => p.startsWith(`services/${other}/`) || p === `services/${other}`)).toEqual(
          [],
        );
      }
      // No pattern reaches into another service's folder (services/** or a glob over services/*).
      expect(paths.filter((p) => p.startsWith('services/') && !p.startsWith(`services/${service}/`))).toEqual(
        [],
      );
      // Every workspace package the service needs, transitively (a missing one = a stale image).
      for (const dir of workspaceDependencies(service)) expect(paths).toContain(`${dir}/**`);
      for (const file of [
        'package.json',
        'pnpm-lock.yaml',
        'pnpm-workspace.yaml',
        'turbo.json',
        'tsconfig.base.json',
        'proto/**',
        'tools/docker/service.Dockerfile',
      ]) {
        expect(paths).toContain(file);
      }
      expect(artifact.custom.dependencies.ignore).toEqual(
        expect.arrayContaining(['**/node_modules/**', '**/dist/**']),
      );
    },
  );

  it('docs/images.md states the minimum skaffold version: the release that introduced the schema', () => {
    // skaffold's schemas/version-mappings: v4beta11 first shipped in skaffold v2.12.0.
    const firstRelease: Record<string, string> = { 'skaffold/v4beta11': 'v2.12.0' };
    const minimum = firstRelease[config.apiVersion];
    expect(minimum).toBeDefined();
    expect(read('docs/images.md')).toContain(`**skaffold ${minimum} or newer**`);
    expect(read('skaffold.yaml')).toContain(`skaffold ${minimum} or newer`);
  });

  it('deploys the development dependencies before the chart: Postgres, NATS, Redis, Mailpit, the mesh issuer', () => {
    const [req, ...more] = config.requires;
    expect(more).toEqual([]);
    expect(req.path).toBe('tools/skaffold/skaffold-deps.yaml');
    const deps = yaml.loadAll(read(req.path)) as Json[];
    expect(deps.map((d) => d.metadata.name).sort()).toEqual([...req.configs].sort());
    const objects: K8sObject[] = deps.flatMap((d) => {
      expect(d.apiVersion).toBe(config.apiVersion);
      expect(d.deploy.kubectl.defaultNamespace).toBe('custos');
      return (d.manifests.rawYaml as string[]).flatMap(
        (f) => yaml.loadAll(read(path.join('tools/skaffold', f))) as K8sObject[],
      );
    });
    // Every manifest under tools/skaffold/deps is deployed.
    const listed = deps.flatMap((d) => d.manifests.rawYaml as string[]).sort();
    expect(listed).toEqual(
      readdirSync(path.join(repoRoot, 'tools/skaffold/deps'))
        .map((f) => `deps/${f}`)
        .sort(),
    );
    expect(validationErrors(objects.filter((o) => !o.apiVersion.startsWith('cert-manager.io/')))).toEqual([]);
    const services = ofKind(objects, 'Service')
      .map((o) => o.metadata.name)
      .sort();
    expect(services).toEqual(['mailpit', 'nats', 'postgres', 'redis']);
    const env = (name: string) =>
      ofKind(objects, 'Deployment').find((d) => d.metadata.name === name)!.spec.template.spec.containers[0];
    expect(env('nats').args).toContain('--jetstream');
    expect(env('postgres').env).toEqual(
      expect.arrayContaining([{ name: 'POSTGRES_HOST_AUTH_METHOD', value: 'trust' }]),
    );
    const issuers = objects.filter((o) => o.kind === 'Issuer').map((o) => o.metadata.name);
    expect(issuers).toContain('custos-mesh-ca');
  });

  it('the dev release points at those dependencies: the Services above are what its values name', () => {
    const values: Record<string, unknown> = config.deploy.helm.releases[0].setValues;
    expect(values['mail.smtpUrl']).toBe('smtp://mailpit:1025');
    const chartValues = yaml.load(read('charts/custos/values.yaml')) as Json;
    expect(chartValues.postgres.migrationUrl).toBe('postgres://custos@postgres:5432/custos');
    expect(chartValues.nats.url).toBe('nats://nats:4222');
    expect(chartValues.redis.host).toBe('redis');
    expect(chartValues.mtls.certManager.issuerRef.name).toBe('custos-mesh-ca');
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

  /** The release's values as skaffold passes them: setValues, and each image template filled in. */
  const devReleaseArgs = (): string[] => {
    const release = config.deploy.helm.releases[0];
    const values: Record<string, unknown> = release.setValues;
    const templates: Record<string, string> = release.setValueTemplates;
    return [
      ...Object.entries(values).flatMap(([k, v]) => ['--set', `${k}=${String(v)}`]),
      ...Object.entries(templates).flatMap(([k, t]) => {
        const image = /IMAGE_FULLY_QUALIFIED_(\w+)/.exec(t)![1]!.replace(/_/g, '-');
        return ['--set', `${k}=${image}:0123abcd`];
      }),
    ];
  };

  it('its values render the chart (a value the chart newly requires breaks `skaffold dev` here first)', () => {
    const objects = renderChart(devReleaseArgs());
    expect(ofKind(objects, 'Deployment')).toHaveLength(SERVICES.length);
    for (const service of SERVICES) {
      const [container] = named(objects, 'Deployment', objectName(service)).spec.template.spec.containers;
      expect(container.image).toBe(`custos-${service}:0123abcd`);
    }
  });

  it("identity may send through the dev cluster's Mailpit, which offers no STARTTLS", () => {
    // identity refuses plain SMTP unless SMTP_ALLOW_INSECURE: without it, no dev e-mail is sent.
    const env = serviceEnv(renderChart(devReleaseArgs()), 'identity');
    expect(env.get('SMTP_ALLOW_INSECURE')).toEqual({ name: 'SMTP_ALLOW_INSECURE', value: 'true' });
    expect(config.deploy.helm.releases[0].setValues['mail.allowInsecure']).toBe(true);
  });

  it('accepts the development-only settings knowingly: the local KMS and trust-auth database roles', () => {
    const values: Record<string, unknown> = config.deploy.helm.releases[0].setValues;
    expect(values['kms.allowLocal']).toBe(true);
    expect(values['postgres.allowPasswordlessRoles']).toBe(true);
  });
});
