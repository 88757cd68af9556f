import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

/**
 * Where the machine's CPU went during a run, from Linux /proc: jiffies of the whole machine and of
 * labelled processes (each service, this load generator, and Postgres/Redis/NATS by process name).
 * Anything else busy on the machine shows up as `other`. Elsewhere than Linux it reports nothing.
 */
export interface CpuSnapshot {
  at: bigint;
  machineBusy: number;
  machineTotal: number;
  /** pid → label and CPU ticks so far. */
  byPid: Map<string, { label: string; ticks: number }>;
}

const INFRA: Record<string, string> = {
  postgres: 'postgres',
  'redis-server': 'redis',
  'nats-server': 'nats',
};

let clockTicks: number | undefined;
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** utime + stime of a process and its command name, or undefined when it is gone. */
function procCpu(pid: number | string): { comm: string; ticks: number } | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = stat.lastIndexOf(')');
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    const fields = stat.slice(close + 2).split(' ');
    // Fields after the command start at field 3 (state); utime is field 14 and stime 15.
    return { comm, ticks: Number(fields[11]) + Number(fields[12]) };
  } catch {
    return undefined;
  }
}

/**
 * The label of an infrastructure process, or undefined. A Postgres backend serving another database
 * than `database` (someone else's work on a shared server) is not labelled, so it counts as other.
 */
function infraLabel(pid: string, comm: string, database: string | undefined): string | undefined {
  const label = INFRA[comm];
  if (label !== 'postgres' || !database) return label;
  let cmdline = '';
  try {
    cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return undefined;
  }
  // Backends read "postgres: [<cluster>: ]<user> <database> <host>(<port>) <state>"; background
  // workers name no host.
  const backend = /^postgres: (?:\S+: )?\S+ (\S+) (?:\S+\(\d+\)|\[local\])/.exec(cmdline);
  return !backend || backend[1] === database ? label : undefined;
}

/**
 * Takes a snapshot; `labelled` names the processes to account separately (label → pid), and
 * `database` is the database whose Postgres backends count as the benchmark's.
 */
export function cpuSnapshot(labelled: Map<string, number>, database?: string): CpuSnapshot | undefined {
  let machine: string;
  try {
    machine = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  } catch {
    return undefined;
  }
  const t = machine.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already inside user).
  const total = t.slice(0, 8).reduce((a, b) => a + b, 0);
  const idle = (t[3] ?? 0) + (t[4] ?? 0);
  const byPid = new Map<string, { label: string; ticks: number }>();
  for (const [label, pid] of labelled) {
    const p = procCpu(pid);
    if (p) byPid.set(String(pid), { label, ticks: p.ticks });
  }
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || byPid.has(entry)) continue;
    const p = procCpu(entry);
    const label = p && infraLabel(entry, p.comm, database);
    if (p && label) byPid.set(entry, { label, ticks: p.ticks });
  }
  return { at: process.hrtime.bigint(), machineBusy: total - idle, machineTotal: total, byPid };
}

/** Labels of the load itself and of unaccounted CPU, left out of the mesh's own total. */
const NOT_MESH = new Set(['load-generator', 'other']);

/**
 * CPU time per request, in µs, of each entry of `cores` (cores busy over the run: 1.0 = one core
 * for the whole run) at `rps` requests per second: cores × 1e6 ÷ rps, rounded to 0.1 µs. Adds
 * `mesh_total` (every entry but the load generator and `other`) and `machine_total` (`machineCores`,
 * all busy CPU of the machine). Empty when nothing was served.
 */
export function perRequestUs(
  cores: Record<string, number>,
  machineCores: number,
  rps: number,
): Record<string, number> {
  if (!(rps > 0)) return {};
  const us = (c: number) => Math.round(((c * 1e6) / rps) * 10) / 10;
  const out: Record<string, number> = {};
  let mesh = 0;
  for (const [label, c] of Object.entries(cores)) {
    out[label] = us(c);
    if (!NOT_MESH.has(label)) mesh += c;
  }
  out['mesh_total'] = us(mesh);
  out['machine_total'] = us(machineCores);
  return out;
}

/** Where the CPU went during a run, in cores; `us_per_request` when the run's rate was given. */
export interface CpuUsage {
  machine_busy_fraction: number | null;
  machine_busy_cores: number;
  processes_cores: Record<string, number>;
  other_cores: number;
  us_per_request?: Record<string, number>;
}

/**
 * CPU used between two snapshots, in cores (1.0 = one core busy for the whole interval). Processes
 * that started or ended in between count only for the part seen by both snapshots. With `rps` (the
 * successful requests per second of the run) it adds the CPU µs per request of each process,
 * computed from the unrounded figures.
 */
export function cpuBetween(
  a: CpuSnapshot | undefined,
  b: CpuSnapshot | undefined,
  rps?: number,
): CpuUsage | undefined {
  if (!a || !b) return undefined;
  const seconds = Number(b.at - a.at) / 1e9;
  const hz = ticksPerSecond();
  const rawCores = (ticks: number) => ticks / hz / seconds;
  const cores = (ticks: number) => Math.round(rawCores(ticks) * 100) / 100;
  const ticks = new Map<string, number>();
  let accounted = 0;
  for (const [pid, end] of b.byPid) {
    const begin = a.byPid.get(pid);
    if (!begin || begin.label !== end.label) continue;
    const d = Math.max(0, end.ticks - begin.ticks);
    ticks.set(end.label, (ticks.get(end.label) ?? 0) + d);
    accounted += d;
  }
  const processes: Record<string, number> = {};
  for (const [label, t] of ticks) processes[label] = cores(t);
  const busy = b.machineBusy - a.machineBusy;
  const totalTicks = b.machineTotal - a.machineTotal;
  const other = Math.max(0, busy - accounted);
  const usage: CpuUsage = {
    machine_busy_fraction: totalTicks > 0 ? Math.round((busy / totalTicks) * 1000) / 1000 : null,
    machine_busy_cores: cores(busy),
    processes_cores: processes,
    other_cores: cores(other),
  };
  if (rps !== undefined) {
    const raw: Record<string, number> = {};
    for (const [label, t] of ticks) raw[label] = rawCores(t);
    raw['other'] = rawCores(other);
    usage.us_per_request = perRequestUs(raw, rawCores(busy), rps);
  }
  return usage;
}
