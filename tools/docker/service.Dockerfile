# syntax=docker/dockerfile:1
#
# The one image recipe of every Custos service. Build it from the repository root:
#
#   docker buildx build --load -f tools/docker/service.Dockerfile --build-arg SERVICE=identity -t custos-identity .
#
# All nine at once, tagged with the chart's appVersion, with SBOM and provenance, pushed:
# `docker buildx bake --push` (docker-bake.hcl at the root; it needs a docker-container builder, and
# without --push or --load the images stay in that builder: docs/images.md).
#
# Each services/<name>/Dockerfile is a copy of this file whose only difference is the default of
# `ARG SERVICE` (plain Docker has no include), so `docker build -f services/<name>/Dockerfile .`
# needs no build argument. Edit this file, then copy it over the nine; tests/chart fails when they drift.

# Node 24 LTS ("Krypton", supported until April 2028), one full version for both stages. To pin by
# digest: --build-arg NODE_IMAGE=node:24.17.0-bookworm-slim@sha256:<digest> (docs/images.md).
# The code itself still runs on Node 20.19+ (package.json engines) for local development.
ARG NODE_IMAGE=node:24.17.0-bookworm-slim

# ---- build: install the workspace, compile the service and its workspace packages, then
# `pnpm deploy` a self-contained folder (dist, migrations, production node_modules) to /out.
FROM ${NODE_IMAGE} AS build
ARG SERVICE
RUN test -n "${SERVICE}" || { echo 'set --build-arg SERVICE=<service name>' >&2; exit 1; }
ENV CI=true \
    TURBO_TELEMETRY_DISABLED=1
# pkcs11js (vault-crypto's PKCS#11 provider) compiles a native addon at install time.
RUN apt-get update -q \
 && apt-get install -y -q --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
RUN npm install --global --no-fund --no-audit pnpm@10.34.9
WORKDIR /src
COPY . .
# Only the service, the workspace packages it depends on and the workspace root (`--filter custos`:
# turbo, typescript) are installed. The store is a BuildKit cache, so a rebuild after a source edit
# downloads nothing.
RUN --mount=type=cache,id=custos-pnpm-store,target=/pnpm/store \
    pnpm install --frozen-lockfile --store-dir /pnpm/store --filter "@custos/${SERVICE}..." --filter custos
RUN pnpm turbo run build --filter="@custos/${SERVICE}..."
# `deploy` copies the service's "files" (dist, migrations) and its production dependencies,
# workspace packages included, into a folder that runs without the monorepo. pnpm 10 refuses the
# non-legacy deploy unless the workspace sets inject-workspace-packages, which this one does not.
# deploy also writes node_modules/.modules.yaml, pnpm's install record: it holds the wall-clock time
# of the install (prunedAt) and lists in no stable order, so two builds of one commit would differ in
# it. Nothing reads it at run time; removed in the same step, it never reaches a layer.
RUN --mount=type=cache,id=custos-pnpm-store,target=/pnpm/store \
    pnpm --filter "@custos/${SERVICE}" deploy --prod --legacy --store-dir /pnpm/store /out \
 && rm -f /out/node_modules/.modules.yaml

# ---- runtime: Node and the deployed folder only, owned by root and run as an unprivileged user,
# so the process cannot rewrite its own code (the chart also mounts the root filesystem read-only).
FROM ${NODE_IMAGE} AS runtime
ARG SERVICE
LABEL org.opencontainers.image.title="custos-${SERVICE}" \
      org.opencontainers.image.description="Custos ${SERVICE} service" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /out /app
USER 10001:10001
# The gRPC, metrics and (gateway) HTTP ports come from the environment; see docs/deployment.md.
# The eight services with a database also ship `node dist/migrate.js` (the chart's migration Job).
CMD ["node", "dist/main.js"]
