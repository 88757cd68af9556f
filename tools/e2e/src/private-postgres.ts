import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freeMeshPort } from '@custos/mesh';

const run = promisify(execFile);

/** Where this machine's Postgres server programs are (initdb, pg_ctl), or undefined when it has none. */
export function postgresBinDir(): string | undefined {
  const fromEnv = process.env.PG_BINDIR;
  if (fromEnv && fs.existsSync(path.join(fromEnv, 'pg_ctl'))) return fromEnv;
  // Debian's layout: /usr/lib/postgresql/<major>/bin, the newest first.
  const root = '/usr/lib/postgresql';
  const majors = fs.existsSync(root)
    ? fs
        .readdirSync(root)
        .filter((d) => /^\d+$/.test(d))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  for (const m of majors) {
    const dir = path.join(root, m, 'bin');
    if (fs.existsSync(path.join(dir, 'initdb')) && fs.existsSync(path.join(dir, 'pg_ctl'))) return dir;
  }
  try {
    const dir = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim();
    if (fs.existsSync(path.join(dir, 'pg_ctl'))) return dir;
  } catch {
    // no pg_config: no server programs found
  }
  return undefined;
}

export interface PrivatePostgresOptions {
  /** max_connections (default 300). */
  maxConnections?: number;
  /**
   * Trade durability for speed (fsync off): for a cluster whose data lives no longer than the test
   * run. A cluster a test restarts to check that acknowledged writes survive keeps the defaults.
   */
  fast?: boolean;
}

/**
 * A Postgres cluster of the tests' own, on a free loopback port and a temporary folder, started with
 * the machine's server programs (Debian's postgresql package): the end-to-end suite's databases live
 * in one, so that its meshes' connections do not compete with the rest of the suite's for the
 * machine server's 100, and a fault test restarts one without disturbing anything else. Postgres
 * refuses to run as root: under root it runs as the OS user `postgres` (runuser).
 */
export class PrivatePostgres {
  private constructor(
    readonly dir: string,
    readonly port: number,
    private readonly bin: string,
    private readonly asUser: string | undefined,
    private readonly password: string,
  ) {}

  /** The superuser URL of database `database`. */
  url(database = 'postgres'): string {
    return `postgres://postgres:${this.password}@127.0.0.1:${this.port}/${database}`;
  }

  private get dataDir(): string {
    return path.join(this.dir, 'data');
  }

  get logFile(): string {
    return path.join(this.dir, 'postgres.log');
  }

  private async cmd(program: string, args: string[]): Promise<void> {
    const exe = path.join(this.bin, program);
    const [file, argv] = this.asUser ? ['runuser', ['-u', this.asUser, '--', exe, ...args]] : [exe, args];
    try {
      await run(file, argv, { timeout: 60_000 });
    } catch (err) {
      const e = err as Error & { stderr?: string };
      let log = '';
      try {
        log = fs.readFileSync(this.logFile, 'utf8').split('\n').slice(-15).join('\n');
      } catch {
        // no log yet
      }
      throw new Error(`${program} ${args[0] ?? ''} failed: ${e.stderr?.trim() || e.message}\n${log}`);
    }
  }

  /** Initialises and starts a new cluster; throws when this machine has no Postgres server programs. */
  static async start(opts: PrivatePostgresOptions = {}): Promise<PrivatePostgres> {
    const bin = postgresBinDir();
    if (!bin) throw new Error('no Postgres server programs (initdb, pg_ctl) on this machine');
    const root = process.getuid?.() === 0;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-pg-'));
    // Password authentication (SCRAM), also for the superuser: the port is on loopback, where any
    // local user could otherwise connect as superuser and run programs as the server's OS user.
    const password = randomBytes(18).toString('base64url');
    const pg = new PrivatePostgres(dir, await freeMeshPort(), bin, root ? 'postgres' : undefined, password);
    try {
      if (root) {
        const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
        const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
        fs.chownSync(dir, uid, gid);
      }
      const pwfile = path.join(dir, 'pwfile');
      fs.writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
      if (root) fs.chownSync(pwfile, fs.statSync(dir).uid, fs.statSync(dir).gid);
      await pg.init(pwfile, opts);
    } catch (err) {
      pg.destroySync();
      throw err;
    }
    return pg;
  }

  private async init(pwfile: string, opts: PrivatePostgresOptions): Promise<void> {
    await this.cmd('initdb', [
      '-D',
      this.dataDir,
      '-A',
      'scram-sha-256',
      '--pwfile',
      pwfile,
      '-U',
      'postgres',
      '-E',
      'UTF8',
      '--no-sync',
    ]);
    fs.rmSync(pwfile, { force: true });
    const settings: Record<string, string> = {
      listen_addresses: "'127.0.0.1'",
      port: String(this.port),
      unix_socket_directories: `'${this.dir}'`,
      max_connections: String(opts.maxConnections ?? 300),
      shared_buffers: "'64MB'",
      ...(opts.fast ? { fsync: 'off', full_page_writes: 'off', synchronous_commit: 'off' } : {}),
    };
    fs.appendFileSync(
      path.join(this.dataDir, 'postgresql.conf'),
      `\n${Object.entries(settings)
        .map(([k, v]) => `${k} = ${v}`)
        .join('\n')}\n`,
    );
    await this.startServer();
  }

  private startServer(): Promise<void> {
    return this.cmd('pg_ctl', ['start', '-D', this.dataDir, '-l', this.logFile, '-w', '-t', '60']);
  }

  /** Stops the server (`fast`: sessions are ended, as a failover or a restart for maintenance does). */
  async stopServer(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    await this.cmd('pg_ctl', ['stop', '-D', this.dataDir, '-m', mode, '-w', '-t', '60']);
  }

  /** Stops and starts again on the same port with the same data. */
  async restart(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    await this.stopServer(mode);
    await this.startServer();
  }

  /** Starts a stopped server again. */
  async resume(): Promise<void> {
    await this.startServer();
  }

  /** The same as destroy, for a process `exit` handler (which cannot wait). */
  destroySync(): void {
    if (!fs.existsSync(this.dir)) return;
    const exe = path.join(this.bin, 'pg_ctl');
    const args = ['stop', '-D', this.dataDir, '-m', 'immediate', '-w', '-t', '30'];
    try {
      if (this.asUser) execFileSync('runuser', ['-u', this.asUser, '--', exe, ...args], { stdio: 'ignore' });
      else execFileSync(exe, args, { stdio: 'ignore' });
    } catch {
      // already stopped
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  /** Stops the server (if running) and removes its folder. */
  async destroy(): Promise<void> {
    try {
      await this.stopServer('immediate');
    } catch {
      // already stopped
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
