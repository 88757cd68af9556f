#!/usr/bin/env bash
# The README's run command: starts the whole mesh in dev mode on a machine that has Node 20.
# Installs pnpm and the dependencies when missing, builds, then hands over to the launcher
# (tools/dev/launch.mjs), which starts Postgres/NATS/Redis as needed and the nine services.
set -euo pipefail
cd "$(dirname "$0")/.."
export TURBO_TELEMETRY_DISABLED=1 DO_NOT_TRACK=1
PNPM_VERSION=10.34.9
if ! command -v pnpm >/dev/null 2>&1 || [ "$(pnpm --version 2>/dev/null)" != "$PNPM_VERSION" ]; then
  echo "installing pnpm $PNPM_VERSION"
  npm install -g "pnpm@$PNPM_VERSION" >/dev/null
fi
pnpm install --frozen-lockfile --reporter=silent
pnpm turbo run build --output-logs=errors-only >/dev/null
exec node tools/dev/launch.mjs "$@"
