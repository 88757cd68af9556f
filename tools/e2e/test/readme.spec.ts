import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, waitFor } from '@custos/service-kit/testing';

// The README's first use, pasted as a new user would: its shell blocks run with
// `set -euo pipefail` against a fresh dev mesh started by `npm run dev`'s launcher, twice (the
// walk-through says it can be run again). If the README rots, this fails.

const REPO = path.resolve(__dirname, '..', '..', '..');

/** The `sh` blocks of the README's "First use" section, but the one that starts the mesh. */
function firstUseBlocks(readme: string): string[] {
  const start = readme.indexOf('## First use');
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)]
    .map((m) => m[1]!)
    .filter((block) => !/\bnpm run dev\b/.test(block));
}

/** Runs a bash script to its end (asynchronously, so the launcher's output keeps draining). */
function runBash(
  script: string,
  cwd: string,
  timeoutMs: number,
): Promise<{ status: number | null; signal: string | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', script], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (out += d.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (status, signal) => {
      clearTimeout(timer);
      resolve({ status, signal, out });
    });
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

describe('the README first use, run as written', () => {
  let launcher: ChildProcess | undefined;
  let database: Awaited<ReturnType<typeof createTestDatabase>> | undefined;
  let home: string;
  let port: number;
  let anvilPort: number;
  const output: string[] = [];

  beforeAll(async () => {
    database = await createTestDatabase('custos_readme');
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-readme-'));
    port = await freePort();
    anvilPort = await freePort();
    const stream = `README_${randomBytes(4).toString('hex').toUpperCase()}`;
    launcher = spawn(process.execPath, [path.join(REPO, 'tools', 'dev', 'launch.mjs')], {
      cwd: REPO,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? home,
        DATABASE_URL: database.url,
        // Its own nats-server (a user per service) and redis-server (a password), as a new user gets.
        CUSTOS_DEV_NATS_PORT: String(await freePort()),
        CUSTOS_DEV_REDIS_PORT: String(await freePort()),
        CUSTOS_DEV_ANVIL_PORT: String(anvilPort),
        NATS_STREAM: stream,
        NATS_SUBJECT_PREFIX: `readme.${stream.toLowerCase()}`,
        PORT: String(port),
        CUSTOS_DEV_DIR: path.join(home, '.custos-dev'),
        LOG_LEVEL: 'warn',
        NO_COLOR: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    for (const s of [launcher.stdout, launcher.stderr])
      s?.on('data', (d: Buffer) => output.push(d.toString('utf8')));
    try {
      await waitFor(
        async () =>
          (await fetch(`http://127.0.0.1:${port}/v1/health`).catch(() => undefined))?.status === 200,
        180_000,
        500,
      );
    } catch (err) {
      throw new Error(`dev mesh did not come up: ${(err as Error).message}\n${output.join('').slice(-4000)}`);
    }
  }, 240_000);

  afterAll(async () => {
    if (launcher && launcher.exitCode === null) {
      const exited = new Promise((resolve) => launcher!.once('exit', resolve));
      launcher.kill('SIGINT');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 20_000))]);
      if (launcher.exitCode === null) launcher.kill('SIGKILL');
    }
    await database?.drop();
  }, 60_000);

  it('has the blocks a new user pastes', () => {
    const blocks = firstUseBlocks(fs.readFileSync(path.join(REPO, 'README.md'), 'utf8'));
    expect(blocks.length).toBeGreaterThanOrEqual(5);
  });

  it('runs every first-use block with set -euo pipefail, and again', async () => {
    const receiver = await freePort();
    const script = [
      'set -euo pipefail',
      ...firstUseBlocks(fs.readFileSync(path.join(REPO, 'README.md'), 'utf8')),
    ]
      .join('\n')
      .replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`)
      .replaceAll('127.0.0.1:8545', `127.0.0.1:${anvilPort}`)
      .replaceAll('9099', String(receiver));
    for (const run of [1, 2]) {
      const r = await runBash(script, home, 180_000);
      const tail = r.out.slice(-4000);
      expect({ run, status: r.status, signal: r.signal, tail: r.status === 0 ? '' : tail }).toEqual({
        run,
        status: 0,
        signal: null,
        tail: '',
      });
      if (run === 2) expect(r.out).toContain('already signed up: signing in');
    }
  }, 420_000);
});
