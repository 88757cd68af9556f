import http from 'node:http';
import { type LatencySummary, summarize } from './stats.js';

/** One HTTP request of a scenario. */
export interface LoadRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
}

/** What a timed run measured. `rps` counts successful (2xx) responses only. */
export interface LoadResult {
  concurrency: number;
  seconds: number;
  requests: number;
  ok: number;
  rps: number;
  /**
   * Responses by status; `transport_error` for a request that got no response at all,
   * `refused_in_body` for a 2xx whose body the generator's `acceptBody` refused (`refused_in_body:
   * <reason>` when it named why, e.g. `refused_in_body: 201 status failed`).
   */
  statuses: Record<string, number>;
  /** Latencies of the successful responses, in milliseconds. */
  latency_ms: LatencySummary;
}

/**
 * Judges the body of a 2xx answer: true accepts it, false refuses it, a string refuses it and says
 * why (e.g. `201 status failed`).
 */
export type BodyCheck = (body: Buffer) => boolean | string;

/** A closed-loop load generator: `concurrency` connections, each sending its next request on a reply. */
export class LoadGenerator {
  private readonly agent: http.Agent;
  private readonly host: string;
  private readonly port: number;

  /**
   * `acceptBody`, when given, reads the body of every 2xx answer and counts one it refuses as
   * `refused_in_body`, not ok (a JSON-RPC node answers an error with HTTP 200; signer answers a
   * transaction whose broadcast failed with 201 and `status: "failed"`). It returns true to accept,
   * false to refuse, or a string to refuse and say why (kept in the status key).
   */
  constructor(
    baseUrl: string,
    private readonly concurrency: number,
    private readonly acceptBody?: BodyCheck,
  ) {
    const url = new URL(baseUrl);
    if (url.protocol !== 'http:') throw new Error(`only http:// gateways are supported, got ${baseUrl}`);
    this.host = url.hostname;
    this.port = Number(url.port || 80);
    this.agent = new http.Agent({ keepAlive: true, maxSockets: concurrency, maxFreeSockets: concurrency });
  }

  /**
   * Sends one request and resolves with its status (0 when the request failed without one) and,
   * for a 2xx whose body `acceptBody` refused, `refused` (its key in `statuses`).
   */
  send(req: LoadRequest): Promise<{ status: number; refused?: string }> {
    const check = this.acceptBody;
    return new Promise((resolve) => {
      const r = http.request(
        {
          host: this.host,
          port: this.port,
          method: req.method,
          path: req.path,
          headers: req.body ? { ...req.headers, 'content-length': String(req.body.length) } : req.headers,
          agent: this.agent,
        },
        (res) => {
          const status = res.statusCode ?? 0;
          const chunks: Buffer[] | undefined = check && status >= 200 && status < 300 ? [] : undefined;
          res.on('data', (c: Buffer) => chunks?.push(c));
          res.on('end', () => {
            const verdict = chunks ? check!(Buffer.concat(chunks)) : true;
            if (verdict === true) resolve({ status });
            else resolve({ status, refused: verdict ? `refused_in_body: ${verdict}` : 'refused_in_body' });
          });
          res.on('error', () => resolve({ status: 0 }));
        },
      );
      r.on('error', () => resolve({ status: 0 }));
      r.end(req.body);
    });
  }

  /**
   * Runs for `seconds`: each of the `concurrency` loops sends `next(i, loop)` (i counts all requests
   * of the run; loop, 0 … concurrency − 1, is the loop asking, whose requests go one after another:
   * a client of its own, e.g. one agent sending its transactions in order) and times it with the
   * monotonic clock. Requests in flight at the deadline complete and count; the rate divides by the
   * time until the last one finished. A `next` that returns undefined has nothing more to send (a
   * finite supply, e.g. pre-signed transactions): the loop that asked ends early, and the run with
   * the last one.
   */
  async run(
    seconds: number,
    next: (i: number, loop: number) => LoadRequest | undefined,
  ): Promise<LoadResult> {
    const latencies: number[] = [];
    const statuses: Record<string, number> = {};
    let issued = 0;
    const start = process.hrtime.bigint();
    const deadline = start + BigInt(Math.round(seconds * 1e9));
    const loop = async (index: number) => {
      while (process.hrtime.bigint() < deadline) {
        const req = next(issued++, index);
        if (!req) return;
        const t0 = process.hrtime.bigint();
        const { status, refused } = await this.send(req);
        const ms = Number(process.hrtime.bigint() - t0) / 1e6;
        const key = status === 0 ? 'transport_error' : (refused ?? String(status));
        statuses[key] = (statuses[key] ?? 0) + 1;
        if (status >= 200 && status < 300 && refused === undefined) latencies.push(ms);
      }
    };
    await Promise.all(Array.from({ length: this.concurrency }, (_, index) => loop(index)));
    const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
    const requests = Object.values(statuses).reduce((a, b) => a + b, 0);
    return {
      concurrency: this.concurrency,
      seconds: Math.round(elapsed * 1000) / 1000,
      requests,
      ok: latencies.length,
      rps: Math.round((latencies.length / elapsed) * 10) / 10,
      statuses,
      latency_ms: summarize(latencies),
    };
  }

  close(): void {
    this.agent.destroy();
  }
}
