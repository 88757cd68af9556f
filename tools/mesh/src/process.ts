import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import type { Readable } from 'node:stream';

/** How a process ended: exit code or signal, or the error that kept it from starting. */
export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  error?: Error;
}

/** How to run one process and where its output goes. */
export interface ManagedProcessOptions {
  /** Label (service name) used in messages. */
  name: string;
  command: string;
  args: readonly string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  /**
   * `pipe` (default): output comes through this process line by line (`onLine`, `tail`) and is
   * appended to `logFile` when given. `file`: the child writes straight into `logFile` (nothing
   * passes through this process, so it costs the caller nothing; `tail` reads the file).
   */
  output?: 'pipe' | 'file';
  logFile?: string;
  onLine?: (line: string) => void;
  /** Own process group: a Ctrl-C at the terminal reaches only the parent, which stops it in order. */
  detached?: boolean;
}

const TAIL = 30;

/** Calls `onLine` with each complete line of `stream` (and the rest at its end). */
export function eachLine(stream: Readable, onLine: (line: string) => void): void {
  let buf = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    buf += chunk;
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      onLine(buf.slice(0, i).replace(/\r$/, ''));
      buf = buf.slice(i + 1);
    }
  });
  stream.on('end', () => {
    if (buf) onLine(buf);
    buf = '';
  });
}

/** The last `n` lines of a file ([] when it cannot be read). */
export function tailOfFile(file: string, n: number): string[] {
  try {
    const fd = fs.openSync(file, 'r');
    try {
      const size = fs.fstatSync(fd).size;
      const len = Math.min(size, 64 * 1024);
      const buf = Buffer.alloc(len);
      fs.readSync(fd, buf, 0, len, size - len);
      return buf.toString('utf8').trimEnd().split('\n').slice(-n);
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return [];
  }
}

/** One child process: started at construction, its exit tracked, its last lines kept. */
export class ManagedProcess {
  readonly name: string;
  readonly child: ChildProcess;
  /** Resolves once, when the process has exited (or failed to start). */
  readonly exited: Promise<ProcessExit>;
  readonly startedAt = Date.now();
  private exitInfo: ProcessExit | null = null;
  private readonly lines: string[] = [];
  private readonly logFile: string | undefined;
  private readonly detached: boolean;

  constructor(o: ManagedProcessOptions) {
    this.name = o.name;
    this.logFile = o.logFile;
    this.detached = o.detached ?? false;
    const header = `\n===== ${new Date().toISOString()} ${o.command} ${o.args.join(' ')}\n`;
    let log: fs.WriteStream | undefined;
    let fd: number | undefined;
    if (o.output === 'file') {
      if (!o.logFile) throw new Error(`${o.name}: output 'file' needs a logFile`);
      fd = fs.openSync(o.logFile, 'a');
      fs.writeSync(fd, header);
    } else if (o.logFile) {
      log = fs.createWriteStream(o.logFile, { flags: 'a' });
      log.on('error', () => undefined);
      log.write(header);
    }
    try {
      this.child = spawn(o.command, [...o.args], {
        cwd: o.cwd,
        env: o.env,
        detached: this.detached,
        stdio: fd === undefined ? ['ignore', 'pipe', 'pipe'] : ['ignore', fd, fd],
      });
    } finally {
      if (fd !== undefined) fs.closeSync(fd);
    }
    if (fd === undefined) {
      const onLine = (line: string) => {
        log?.write(`${line}\n`);
        this.lines.push(line);
        if (this.lines.length > TAIL) this.lines.shift();
        o.onLine?.(line);
      };
      if (this.child.stdout) eachLine(this.child.stdout, onLine);
      if (this.child.stderr) eachLine(this.child.stderr, onLine);
    }
    this.exited = new Promise((resolve) => {
      const done = (exit: ProcessExit) => {
        if (this.exitInfo) return;
        this.exitInfo = exit;
        // Let the last output lines through before the log stream closes.
        setTimeout(() => log?.end(), 50);
        resolve(exit);
      };
      // 'close' comes after the output streams have ended, so `tail` holds the last words.
      this.child.on('close', (code, signal) => done({ code, signal }));
      this.child.on('error', (error) => done({ code: null, signal: null, error }));
    });
  }

  /** The pid, or undefined when spawning failed. */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** True until the process has exited. */
  get alive(): boolean {
    return (
      this.exitInfo === null &&
      this.child.pid !== undefined &&
      this.child.exitCode === null &&
      this.child.signalCode === null
    );
  }

  /** How it ended, or null while it runs. */
  get exit(): ProcessExit | null {
    return this.exitInfo;
  }

  /** "exit code 1" / "signal SIGKILL" / the spawn error / "running". */
  describeExit(): string {
    const e = this.exitInfo;
    if (!e) return 'running';
    if (e.error) return e.error.message;
    return e.signal ? `signal ${e.signal}` : `exit code ${e.code}`;
  }

  /** Its last `n` output lines. */
  tail(n = 10): string[] {
    if (this.lines.length > 0 || !this.logFile) return this.lines.slice(-n);
    return tailOfFile(this.logFile, n);
  }

  /** Sends a signal (to its whole process group when it was started detached). */
  signal(sig: NodeJS.Signals): void {
    const pid = this.child.pid;
    if (!this.alive || pid === undefined) return;
    try {
      if (this.detached) process.kill(-pid, sig);
      else this.child.kill(sig);
    } catch {
      try {
        this.child.kill(sig);
      } catch {
        // gone meanwhile
      }
    }
  }

  /** Stops it: `sig`, then SIGKILL after `graceMs`. Resolves with how it ended. */
  async stop(sig: NodeJS.Signals = 'SIGTERM', graceMs = 10_000): Promise<ProcessExit> {
    if (!this.alive) return this.exited;
    this.signal(sig);
    let timer: NodeJS.Timeout | undefined;
    const gone = await Promise.race([
      this.exited.then(() => true),
      new Promise<boolean>((r) => (timer = setTimeout(() => r(false), graceMs))),
    ]);
    clearTimeout(timer);
    if (!gone) this.signal('SIGKILL');
    return this.exited;
  }
}
