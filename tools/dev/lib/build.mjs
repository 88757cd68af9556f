// Building what dev mode runs: @custos/mesh (the mesh launcher the rest of lib/ imports) and the
// services. Node built-ins only, so it runs before anything is built.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { DevError, ROOT, findBinary, say } from './util.mjs';

function pnpmCommand() {
  const execPath = process.env.npm_execpath;
  if (execPath && /pnpm/.test(path.basename(execPath))) {
    return /\.[cm]?js$/.test(execPath) ? [process.execPath, [execPath]] : [execPath, []];
  }
  const pnpm = findBinary('pnpm');
  if (pnpm) return [pnpm, []];
  const corepack = findBinary('corepack');
  if (corepack) return [corepack, ['pnpm']];
  return null;
}

/** The build outputs dev mode needs that are missing (relative paths). */
export function missingOutputs({ infraOnly = false } = {}) {
  const wanted = [path.join('tools', 'mesh', 'dist', 'index.js')];
  if (!infraOnly) {
    const servicesDir = path.join(ROOT, 'services');
    for (const name of fs.readdirSync(servicesDir).sort()) {
      if (fs.existsSync(path.join(servicesDir, name, 'package.json')))
        wanted.push(path.join('services', name, 'dist', 'main.js'));
    }
  }
  return wanted.filter((p) => !fs.existsSync(path.join(ROOT, p)));
}

/**
 * Runs `pnpm turbo run build` when something dev mode runs has not been built yet (with
 * --infra-only, only the mesh launcher is needed).
 */
export async function ensureBuilt({ infraOnly = false } = {}) {
  const missing = missingOutputs({ infraOnly });
  if (missing.length === 0) return;
  const cmd = pnpmCommand();
  if (!cmd)
    throw new DevError(
      'pnpm is needed to build the services: `npm install -g pnpm@10` (or `corepack enable`), then `pnpm install`',
    );
  const args = ['turbo', 'run', 'build', ...(infraOnly ? ['--filter=@custos/mesh'] : [])];
  const first = missing.find((m) => m.includes('gateway')) ?? missing[0];
  say(
    `${first}${missing.length > 1 ? ` (and ${missing.length - 1} more)` : ''} missing: building first with \`pnpm ${args.join(' ')}\``,
  );
  const code = await new Promise((resolve) => {
    const child = spawn(cmd[0], [...cmd[1], ...args], { cwd: ROOT, stdio: 'inherit' });
    child.on('error', () => resolve(127));
    child.on('exit', (c) => resolve(c ?? 1));
  });
  if (code !== 0)
    throw new DevError(
      `\`pnpm ${args.join(' ')}\` failed (exit ${code}); fix the build and run pnpm dev again`,
    );
}
