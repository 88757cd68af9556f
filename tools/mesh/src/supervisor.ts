import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { ManagedProcess, type ProcessExit } from './process';
import { REPO_ROOT, SERVICES, type ServiceName, serviceMain } from './services';

/** When and how often a service that exits on its own is started again. */
export interface RestartPolicy {
  /** Wait before the first restart; doubled for each further one in a row. */
  initialDelayMs: number;
  /** The most it waits between two restarts. */
  maxDelayMs: number;
  /** A run at least this long counts as healthy: the next crash starts again from `initialDelayMs`. */
  resetAfterMs: number;
}

/** Dev mode's policy: 1 s, 2 s, 4 s ... up to 30 s; a minute of running forgives earlier crashes. */
export const DEFAULT_RESTART_POLICY: RestartPolicy = {
  initialDelayMs: 1000,
  maxDelayMs: 30_000,
  resetAfterMs: 60_000,
};

/** The wait before restart number `attempt` (0 for the first) under `policy`: capped doubling. */
export function restartDelay(attempt: number, policy: RestartPolicy = DEFAULT_RESTART_POLICY): number {
  return Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** Math.min(attempt, 30));
}

/** A service ended. */
export interface ServiceExitEvent {
  service: ServiceName;
  pid: number | undefined;
  exit: ProcessExit;
  /** "exit code 1", "signal SIGKILL", ... */
  description: string;
  /** True when it was told to stop (kill, stop). */
  expected: boolean;
  /** When it will be started again (supervised, unexpected exits only), else null. */
  restartInMs: number | null;
  /** Its last output lines. */
  tail: string[];
}

/** How to run the services of one mesh. */
export interface MeshSupervisorOptions {
  /** The environment of each service. */
  env: (service: ServiceName) => NodeJS.ProcessEnv;
  /** Which services, in start order (default: all nine). */
  services?: readonly ServiceName[];
  /** Repository root the services run from (default: this checkout). */
  root?: string;
  /** Extra node flags for every service, e.g. `--cpu-prof`. */
  nodeArgs?: readonly string[];
  /** Each service's output is appended to `<logDir>/<service>.log`. */
  logDir?: string;
  /** `pipe` (default): lines pass through `onLine`. `file`: straight into the log file (needs logDir). */
  output?: 'pipe' | 'file';
  onLine?: (service: ServiceName, line: string) => void;
  onSpawn?: (service: ServiceName, pid: number | undefined) => void;
  onExit?: (event: ServiceExitEvent) => void;
  /** Each service in its own process group. */
  detached?: boolean;
  /** Start a service again when it exits on its own (default: no). */
  restart?: RestartPolicy | false;
}

/**
 * Runs the services of one mesh: starts them in order, and kills, restarts and stops them on
 * demand. With a restart policy it also supervises: a service that exits unexpectedly is started
 * again after a capped, growing delay.
 */
export class MeshSupervisor {
  /** The current process of each service that was started. */
  readonly processes = new Map<ServiceName, ChildProcess>();
  /** Unexpected exits so far, oldest first. */
  readonly crashes: ServiceExitEvent[] = [];
  private readonly current = new Map<ServiceName, ManagedProcess>();
  private readonly expected = new Set<ManagedProcess>();
  private readonly attempts = new Map<ServiceName, number>();
  private readonly timers = new Map<ServiceName, NodeJS.Timeout>();
  private stopping = false;

  constructor(private readonly o: MeshSupervisorOptions) {}

  /** The services this supervisor runs, in start order. */
  get services(): readonly ServiceName[] {
    return this.o.services ?? SERVICES;
  }

  /** Starts every service, in order. */
  startAll(): void {
    for (const s of this.services) this.start(s);
  }

  /** Starts one service (again); throws while it is running. */
  start(service: ServiceName): ManagedProcess {
    if (this.current.get(service)?.alive) throw new Error(`${service} is still running`);
    this.stopping = false;
    this.cancelRestart(service);
    const root = this.o.root ?? REPO_ROOT;
    const proc = new ManagedProcess({
      name: service,
      command: process.execPath,
      args: [...(this.o.nodeArgs ?? []), serviceMain(service, root)],
      env: this.o.env(service),
      cwd: root,
      output: this.o.output ?? 'pipe',
      ...(this.o.logDir ? { logFile: path.join(this.o.logDir, `${service}.log`) } : {}),
      ...(this.o.onLine ? { onLine: (line: string) => this.o.onLine!(service, line) } : {}),
      detached: this.o.detached ?? false,
    });
    this.current.set(service, proc);
    this.processes.set(service, proc.child);
    this.o.onSpawn?.(service, proc.pid);
    void proc.exited.then((exit) => this.exited(service, proc, exit));
    return proc;
  }

  /** Is the service running now? */
  isRunning(service: ServiceName): boolean {
    return this.current.get(service)?.alive ?? false;
  }

  /** The pid of each running service. */
  pids(): Map<ServiceName, number> {
    const out = new Map<ServiceName, number>();
    for (const [s, p] of this.current) if (p.alive && p.pid !== undefined) out.set(s, p.pid);
    return out;
  }

  /** The current process of a service. */
  process(service: ServiceName): ManagedProcess | undefined {
    return this.current.get(service);
  }

  /** Its last output lines. */
  tail(service: ServiceName, n = 10): string[] {
    return this.current.get(service)?.tail(n) ?? [];
  }

  /**
   * Sends `signal` and waits for the exit, which is expected (no restart). Resolves to the exit
   * code (null after a signal, or when it was not running).
   */
  async kill(service: ServiceName, signal: NodeJS.Signals = 'SIGKILL'): Promise<number | null> {
    this.cancelRestart(service);
    const proc = this.current.get(service);
    if (!proc) return null;
    if (!proc.alive) return (await proc.exited).code;
    this.expected.add(proc);
    proc.signal(signal);
    return (await proc.exited).code;
  }

  /** Starts a service again after `kill`, with the same settings. */
  restart(service: ServiceName): void {
    this.start(service);
  }

  /**
   * Stops every service: SIGTERM to all at once, SIGKILL to those still running after `graceMs`.
   * Pending restarts are cancelled. Resolves, once all have exited, to those it had to SIGKILL.
   */
  async stop(graceMs = 10_000): Promise<ServiceName[]> {
    this.stopping = true;
    for (const s of [...this.timers.keys()]) this.cancelRestart(s);
    for (const p of this.current.values()) this.expected.add(p);
    const live = [...this.current.entries()].filter(([, p]) => p.alive);
    const exits = await Promise.all(live.map(([, p]) => p.stop('SIGTERM', graceMs)));
    return live.filter((_, i) => exits[i]!.signal === 'SIGKILL').map(([s]) => s);
  }

  /** Sends a signal to every running service at once, without waiting (a last resort at exit). */
  signalAll(signal: NodeJS.Signals): void {
    for (const p of this.current.values()) {
      this.expected.add(p);
      p.signal(signal);
    }
  }

  private cancelRestart(service: ServiceName): void {
    const t = this.timers.get(service);
    if (t) clearTimeout(t);
    this.timers.delete(service);
  }

  private exited(service: ServiceName, proc: ManagedProcess, exit: ProcessExit): void {
    const expected = this.stopping || this.expected.has(proc);
    this.expected.delete(proc);
    let restartInMs: number | null = null;
    if (!expected && this.o.restart && this.current.get(service) === proc) {
      const policy = this.o.restart;
      const ranFor = Date.now() - proc.startedAt;
      const attempt = ranFor >= policy.resetAfterMs ? 0 : (this.attempts.get(service) ?? 0);
      restartInMs = restartDelay(attempt, policy);
      this.attempts.set(service, attempt + 1);
      const timer = setTimeout(() => {
        this.timers.delete(service);
        if (!this.stopping && !this.isRunning(service)) this.start(service);
      }, restartInMs);
      timer.unref();
      this.timers.set(service, timer);
    }
    const event: ServiceExitEvent = {
      service,
      pid: proc.pid,
      exit,
      description: proc.describeExit(),
      expected,
      restartInMs,
      tail: proc.tail(10),
    };
    if (!expected) this.crashes.push(event);
    this.o.onExit?.(event);
  }
}
