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
      res.writeHead(req.url === '/fail' ? 503 : 200).end(req.url === '/rpc-ok' ? '{"result":1}' : '{}');
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

  it('tells next which loop asks: each loop’s requests go one after another, every loop takes part', async () => {
    const load = new LoadGenerator(url, 3);
    try {
      seen.length = 0;
      const sent = [0, 0, 0];
      const r = await load.run(600, (_i, loop) =>
        sent[loop]! < 4 ? { method: 'GET', path: `/l${loop}-${sent[loop]!++}`, headers: {} } : undefined,
      );
      expect(r.ok).toBe(12);
      expect(sent).toEqual([4, 4, 4]);
      for (const l of [0, 1, 2]) {
        expect(seen.filter((p) => p.startsWith(`/l${l}-`))).toEqual([0, 1, 2, 3].map((k) => `/l${l}-${k}`));
      }
    } finally {
      load.close();
    }
  });

  it('with acceptBody, counts a 2xx whose body it refuses as refused_in_body', async () => {
    const load = new LoadGenerator(url, 2, (body) => body.toString() === '{"result":1}');
    try {
      const r = await load.run(600, (i) =>
        i < 4
          ? { method: 'GET', path: ['/ok', '/fail', '/rpc-error', '/rpc-ok'][i]!, headers: {} }
          : undefined,
      );
      expect(r).toMatchObject({
        requests: 4,
        ok: 1,
        statuses: { '200': 1, '503': 1, refused_in_body: 2 },
      });
    } finally {
      load.close();
    }
  });

  it('keeps the reason acceptBody gives for a refusal in the status key, and counts it as failed', async () => {
    const load = new LoadGenerator(url, 2, (body) =>
      body.toString() === '{"result":1}' ? true : `200 body ${body.toString()}`,
    );
    try {
      const r = await load.run(600, (i) =>
        i < 3 ? { method: 'GET', path: ['/rpc-ok', '/ok', '/fail'][i]!, headers: {} } : undefined,
      );
      expect(r).toMatchObject({
        requests: 3,
        ok: 1,
        statuses: { '200': 1, '503': 1, 'refused_in_body: 200 body {}': 1 },
      });
      expect(r.latency_ms.count).toBe(1);
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
