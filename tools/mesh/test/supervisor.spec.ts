import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MeshSupervisor, type ServiceExitEvent, type ServiceName } from '../src/index';

/** A stand-in repository whose services are small scripts. */
function fakeRoot(scripts: Partial<Record<ServiceName, string>>): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-mesh-test-'));
  for (const [name, code] of Object.entries(scripts)) {
    const dir = path.join(root, 'services', name, 'dist');
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'main.js'), code);
  }
  return root;
}

const until = async (check: () => boolean, timeoutMs = 10_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
};

// Runs forever, says hello with its environment, exits 0 on SIGTERM.
const SERVER = `console.log('hello ' + process.env.GRPC_PORT);
process.on('SIGTERM', () => { console.log('stopped'); process.exit(0); });
setInterval(() => {}, 1000);`;

describe('MeshSupervisor', () => {
  it('starts services in order with their environment, kills one (expected), restarts it, stops all', async () => {
    const root = fakeRoot({ identity: SERVER, gateway: SERVER });
    const lines: string[] = [];
    const exits: ServiceExitEvent[] = [];
    const sup = new MeshSupervisor({
      root,
      services: ['identity', 'gateway'],
      env: (s) => ({ PATH: process.env.PATH, GRPC_PORT: s === 'identity' ? '1' : '2' }),
      onLine: (s, l) => lines.push(`${s}: ${l}`),
      onExit: (e) => exits.push(e),
      restart: { initialDelayMs: 50, maxDelayMs: 100, resetAfterMs: 60_000 },
    });
    sup.startAll();
    await until(() => lines.length === 2);
    expect(lines.sort()).toEqual(['gateway: hello 2', 'identity: hello 1']);
    expect(await sup.kill('identity', 'SIGTERM')).toBe(0);
    await new Promise((r) => setTimeout(r, 200));
    expect(sup.isRunning('identity')).toBe(false);
    expect(exits).toEqual([
      expect.objectContaining({ service: 'identity', expected: true, restartInMs: null }),
    ]);
    sup.restart('identity');
    expect(() => sup.restart('identity')).toThrow(/still running/);
    await until(() => lines.filter((l) => l === 'identity: hello 1').length === 2);
    await sup.stop(2000);
    expect(sup.isRunning('identity') || sup.isRunning('gateway')).toBe(false);
    expect(sup.crashes).toEqual([]);
  });

  it('restarts a service that exits on its own, after a growing delay, and says why with its last lines', async () => {
    const root = fakeRoot({ billing: `console.error('boom: no database'); process.exit(3);` });
    const exits: ServiceExitEvent[] = [];
    const sup = new MeshSupervisor({
      root,
      services: ['billing'],
      env: () => ({ PATH: process.env.PATH }),
      onExit: (e) => exits.push(e),
      restart: { initialDelayMs: 50, maxDelayMs: 120, resetAfterMs: 60_000 },
    });
    sup.startAll();
    await until(() => exits.length >= 4);
    await sup.stop();
    expect(exits.slice(0, 4).map((e) => e.restartInMs)).toEqual([50, 100, 120, 120]);
    expect(exits[0]).toMatchObject({
      service: 'billing',
      expected: false,
      description: 'exit code 3',
      tail: ['boom: no database'],
    });
    const count = exits.length;
    await new Promise((r) => setTimeout(r, 300));
    expect(exits).toHaveLength(count);
  });

  it('writes output straight to a log file in file mode, and SIGKILLs what ignores SIGTERM', async () => {
    const root = fakeRoot({
      audit: `process.on('SIGTERM', () => console.log('ignored')); console.log('up'); setInterval(() => {}, 1000);`,
    });
    const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-mesh-logs-'));
    const sup = new MeshSupervisor({
      root,
      services: ['audit'],
      env: () => ({ PATH: process.env.PATH }),
      logDir,
      output: 'file',
    });
    sup.startAll();
    await until(() => sup.tail('audit').includes('up'));
    const started = Date.now();
    await sup.stop(300);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(sup.isRunning('audit')).toBe(false);
    const log = fs.readFileSync(path.join(logDir, 'audit.log'), 'utf8');
    expect(log).toMatch(/===== .*main\.js\nup\nignored\n/);
  });
});
