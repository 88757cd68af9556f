// Infrastructure processes of the dev launcher (nats-server, redis-server): a ManagedProcess of
// @custos/mesh with a pid file, prefixed output and a loud report when it dies.
import path from 'node:path';
import { ManagedProcess } from '@custos/mesh';
import { pollUntil, prefix, printPrefixed, removePidFile, say, shout, writePidFile } from './util.mjs';

/**
 * One process the launcher started. Each runs in its own process group (detached), so a Ctrl-C
 * at the terminal reaches only the launcher, which then stops services first and infrastructure
 * last, instead of everything at once.
 */
export class ManagedChild {
  /**
   * @param {object} o
   * @param {string} o.name        label and pid/log file name
   * @param {string} o.command
   * @param {string[]} o.args
   * @param {object} o.env
   * @param {string} o.cwd
   * @param {string} o.logDir      output is appended to <logDir>/<name>.log
   * @param {string} o.runDir      pid goes to <runDir>/<name>.pid
   * @param {number|undefined} o.color  when set, output is also shown on screen with a prefix
   * @param {(child: ManagedChild) => void} o.onUnexpectedExit
   */
  constructor(o) {
    this.name = o.name;
    this.runDir = o.runDir;
    this.logFile = path.join(o.logDir, `${o.name}.log`);
    this.expectExit = false;
    const pfx = o.color === undefined ? null : prefix(o.name, o.color);
    this.proc = new ManagedProcess({
      name: o.name,
      command: o.command,
      args: o.args,
      env: o.env,
      cwd: o.cwd,
      logFile: this.logFile,
      detached: true,
      ...(pfx ? { onLine: (line) => printPrefixed(pfx, line) } : {}),
    });
    this.exited = this.proc.exited.then((exit) => {
      removePidFile(this.runDir, this.name);
      if (!this.expectExit) {
        // A Ctrl-C may be on its way; only complain when we are still running a moment later.
        setTimeout(() => {
          if (!this.expectExit) o.onUnexpectedExit?.(this);
        }, 300);
      }
      return exit;
    });
    if (this.proc.pid) writePidFile(this.runDir, this.name, this.proc.pid);
  }

  get alive() {
    return this.proc.alive;
  }

  /** Its last 30 output lines. */
  get tail() {
    return this.proc.tail(30);
  }

  /** "exit code 1" / "signal SIGKILL" / the spawn error. */
  describeExit() {
    return this.proc.describeExit();
  }

  /** Sends a signal to the child's process group. */
  signal(sig) {
    this.proc.signal(sig);
  }

  /** Stops it: `sig`, then SIGKILL after graceMs. Resolves when it has exited. */
  async stop(sig = 'SIGTERM', graceMs = 10_000) {
    this.expectExit = true;
    if (!this.alive) return;
    this.signal(sig);
    const gone = await Promise.race([
      this.exited.then(() => true),
      new Promise((r) => setTimeout(() => r(false), graceMs)),
    ]);
    if (!gone) {
      say(`${this.name} still running after ${Math.round(graceMs / 1000)} s: SIGKILL`);
      this.signal('SIGKILL');
      await Promise.race([this.exited, pollUntil(() => false, 3000)]);
    }
  }
}

/** Default loud report of a child that died while the launcher was running. */
export function reportUnexpectedExit(child, what = 'the other services keep running') {
  const last = child.tail.slice(-5);
  shout(`${child.name} exited unexpectedly (${child.describeExit()}); ${what}. Log: ${child.logFile}`);
  for (const l of last) printPrefixed(prefix(child.name, '1;31'), l);
}
