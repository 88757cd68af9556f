import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { LoadGenerator } from './load';

describe('LoadGenerator', () => {
  let server: http.Server;
  let url: string;
  const seen: string[] = [];

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      seen.push(req.url ?? '');
      req.resume();
      res.writeHead(req.url === '/fail' ? 503 : 200).end('{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise((r) => server.close(r)));

  it('stops a run when the supply runs out, sending each request once', async () => {
    const load = new LoadGenerator(url, 4);
    try {
      seen.length = 0;
      // A long deadline: only the end of the supply can end this run.
      const r = await load.run(600, (i) =>
        i < 10 ? { method: 'GET', path: `/r${i}`, headers: {} } : undefined,
      );
      expect(r.requests).toBe(10);
      expect(r.ok).toBe(10);
      expect(r.statuses).toEqual({ '200': 10 });
      expect([...seen].sort()).toEqual(Array.from({ length: 10 }, (_, i) => `/r${i}`).sort());
    } finally {
      load.close();
    }
  });

  it('counts only 2xx answers as ok', async () => {
    const load = new LoadGenerator(url, 2);
    try {
      const r = await load.run(600, (i) =>
        i < 6 ? { method: 'GET', path: i % 2 ? '/fail' : '/ok', headers: {} } : undefined,
      );
      expect(r).toMatchObject({ requests: 6, ok: 3, statuses: { '200': 3, '503': 3 } });
    } finally {
      load.close();
    }
  });
});
