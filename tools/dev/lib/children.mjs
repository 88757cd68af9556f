// Child processes of the dev launcher: spawning, output, exit tracking, stopping.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {
  eachLine,
  pollUntil,
  prefix,
  printPrefixed,
  removePidFile,
  say,
  shout,
  writePidFile,
} from './util.mjs';

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
    this.exitInfo = null;
    this.tail = [];

    const log = fs.createWriteStream(this.logFile, { flags: 'a' });
    log.on('error', () => undefined);
    log.write(`\n===== ${new Date().toISOString()} ${o.command} ${o.args.join(' ')}\n`);
    this.proc = spawn(o.command, o.args, {
      cwd: o.cwd,
      env: o.env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const pfx = o.color === undefined ? null : prefix(o.name, o.color);
    const onLine = (line) => {
      log.write(`${line}\n`);
      this.tail.push(line);
      if (this.tail.length > 30) this.tail.shift();
      if (pfx) printPrefixed(pfx, line);
    };
    eachLine(this.proc.stdout, onLine);
    eachLine(this.proc.stderr, onLine);

    this.exited = new Promise((resolve) => {
      let settled = false;
      const done = (code, signal, error) => {
        if (settled) return;
        settled = true;
        this.exitInfo = { code, signal, error };
        removePidFile(this.runDir, this.name);
        // Let the last output lines through before the log stream closes.
        setTimeout(() => log.end(), 50);
        resolve(this.exitInfo);
        if (!this.expectExit) {
          // A Ctrl-C may be on its way; only complain when we are still running a moment later.
          setTimeout(() => {
            if (!this.expectExit) o.onUnexpectedExit?.(this);
          }, 300);
        }
      };
      this.proc.on('exit', (code, signal) => done(code, signal));
      this.proc.on('error', (err) => done(null, null, err));
    });
    if (this.proc.pid) writePidFile(this.runDir, this.name, this.proc.pid);
  }

  get alive() {
    return this.exitInfo === null && this.proc.pid !== undefined;
  }

  /** "exit code 1" / "signal SIGKILL" / the spawn error. */
  describeExit() {
    const e = this.exitInfo;
    if (!e) return 'running';
    if (e.error) return e.error.message;
    return e.signal ? `signal ${e.signal}` : `exit code ${e.code}`;
  }

  /** Sends a signal to the child's process group. */
  signal(sig) {
    if (!this.alive) return;
    try {
      process.kill(-this.proc.pid, sig);
    } catch {
      try {
        this.proc.kill(sig);
      } catch {
        // gone meanwhile
      }
    }
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

/** Stops a group of children together: SIGTERM to all, SIGKILL to those left after graceMs. */
export async function stopAll(children, graceMs) {
  const live = children.filter((c) => c.alive);
  for (const c of children) c.expectExit = true;
  if (live.length === 0) return;
  for (const c of live) c.signal('SIGTERM');
  await Promise.race([Promise.all(live.map((c) => c.exited)), new Promise((r) => setTimeout(r, graceMs))]);
  const left = live.filter((c) => c.alive);
  if (left.length > 0) {
    shout(
      `still running after ${Math.round(graceMs / 1000)} s, killing: ${left.map((c) => c.name).join(', ')}`,
    );
    for (const c of left) c.signal('SIGKILL');
    await Promise.race([Promise.all(left.map((c) => c.exited)), new Promise((r) => setTimeout(r, 3000))]);
  }
}

/** Default loud report of a child that died while the launcher was running. */
export function reportUnexpectedExit(child, what = 'the other services keep running') {
  const last = child.tail.slice(-5);
  shout(`${child.name} exited unexpectedly (${child.describeExit()}); ${what}. Log: ${child.logFile}`);
  for (const l of last) printPrefixed(prefix(child.name, '1;31'), l);
}
