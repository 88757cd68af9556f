import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { freeMeshPort } from './ports';
import { ManagedProcess } from './process';

/** The chain id anvil answers with by default; signer registers it as the `anvil` chain. */
export const ANVIL_CHAIN_ID = 31337;

/**
 * The anvil binary: ANVIL_BIN, else the platform package that `@foundry-rs/anvil` (pinned in this
 * package) installs as an optional dependency (`@foundry-rs/anvil-<os>-<arch>/bin/anvil`).
 */
export function anvilBinary(): string {
  if (process.env.ANVIL_BIN) return process.env.ANVIL_BIN;
  const req = createRequire(require.resolve('@foundry-rs/anvil/package.json'));
  const arch = process.arch === 'x64' ? 'amd64' : process.arch;
  const pkg = `@foundry-rs/anvil-${process.platform}-${arch}`;
  let dir: string;
  try {
    dir = path.dirname(req.resolve(`${pkg}/package.json`));
  } catch {
    throw new Error(`anvil: ${pkg} is not installed (pnpm install, or set ANVIL_BIN)`);
  }
  return path.join(dir, 'bin', process.platform === 'win32' ? 'anvil.exe' : 'anvil');
}

/** A running local EVM chain. */
export interface MeshAnvil {
  /** `http://127.0.0.1:<port>`: what signer gets as LOCAL_EVM_RPC_URL. */
  url: string;
  port: number;
  process: ManagedProcess;
  stop(graceMs?: number): Promise<void>;
}

/** True when the JSON-RPC endpoint answers eth_chainId. */
export async function anvilReadyAt(url: string, timeoutMs = 1000): Promise<boolean> {
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    return res.ok && typeof ((await res.json()) as { result?: unknown }).result === 'string';
  } catch {
    return false;
  }
}

/**
 * Starts anvil on a free loopback port (its default chain id 31337, its ten funded dev accounts)
 * and waits until it answers eth_chainId. In memory: a restart starts a fresh chain.
 */
export async function startMeshAnvil(o: { port?: number; timeoutMs?: number } = {}): Promise<MeshAnvil> {
  const port = o.port ?? (await freeMeshPort());
  const url = `http://127.0.0.1:${port}`;
  const proc = new ManagedProcess({
    name: 'anvil',
    command: anvilBinary(),
    args: ['--host', '127.0.0.1', '--port', String(port), '--chain-id', String(ANVIL_CHAIN_ID), '--silent'],
    env: { PATH: process.env.PATH ?? '' },
    cwd: os.tmpdir(),
  });
  const deadline = Date.now() + (o.timeoutMs ?? 15_000);
  let ready = false;
  while (!ready && proc.alive && Date.now() < deadline) {
    ready = await anvilReadyAt(url, 500);
    if (!ready) await new Promise((r) => setTimeout(r, 100));
  }
  if (!ready || !proc.alive) {
    await proc.stop('SIGTERM', 2000);
    throw new Error(
      `anvil did not start on ${url} (${proc.describeExit()}):\n  ${proc.tail(8).join('\n  ')}`,
    );
  }
  return {
    url,
    port,
    process: proc,
    stop: async (graceMs = 5000) => {
      await proc.stop('SIGTERM', graceMs);
    },
  };
}
