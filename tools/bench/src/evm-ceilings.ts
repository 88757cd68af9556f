import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { SigningKey, Wallet, computeAddress, version as ethersVersion } from 'ethers';
import type { Ceiling } from './ceilings.js';
import { type CpuUsage, cpuBetween, cpuSnapshot } from './cpu.js';
import { presignPerAccount, rpcBody, transferTransaction } from './evm-fns.js';
import { type LoadRequest, LoadGenerator } from './load.js';
import { eachLimited, fund, nonceOf, settlePool } from './setup.js';
import type { SignWorkerAnswer, SignWorkerTask } from './sign-worker.js';
import type { LatencySummary } from './stats.js';

/** Runs one task in a fresh worker thread (sign-worker.ts) and resolves with its answer. */
function inWorker(task: SignWorkerTask): Promise<SignWorkerAnswer> {
  return new Promise((resolve, reject) => {
    const w = new Worker(path.join(__dirname, 'sign-worker.js'), { workerData: task });
    w.once('message', (m: SignWorkerAnswer) => resolve(m));
    w.once('error', reject);
    w.once('exit', (code) => {
      if (code !== 0) reject(new Error(`sign worker exited with ${code}`));
    });
  });
}

/**
 * The signing ceiling: ethers 6 signing the EIP-1559 transfer of `sign-intent` (build, sign the
 * hash, serialize, hash) in a closed loop, one worker thread per `threads`, all at once, for
 * `seconds` after one second of warm-up; the rate is the sum of the threads' rates. With one
 * thread it is what one core does; with one per CPU, what the machine does with nothing else.
 * With `recoverySeconds`, it also measures (on this thread, `recoverySeconds` each) the same work
 * plus, in turn: the key's address derived from its public key (`computeAddress(key.publicKey)`,
 * a fixed-base multiplication: what signer's `signEvmTransaction` does since commit 19855e3), and
 * the sender read back off the signed transaction (`tx.from`, a public-key recovery: what it did
 * before that commit, and what a signer that knows its key's address need not do).
 */
export async function ethersSign(seconds: number, threads: number, recoverySeconds = 0): Promise<Ceiling> {
  const to = Wallet.createRandom().address;
  const answers = await Promise.all(
    Array.from({ length: threads }, () => inWorker({ mode: 'rate', warmupS: 1, seconds, to })),
  );
  let ops = 0;
  let rate = 0;
  let longest = 0;
  for (const a of answers) {
    if (a.mode !== 'rate') throw new Error('sign worker answered another task');
    ops += a.ops;
    rate += a.ops / a.seconds;
    longest = Math.max(longest, a.seconds);
  }
  const detail: Record<string, unknown> = {
    transaction:
      'EIP-1559 transfer (chain 31337, 21,000 gas, 2 gwei fee cap, 1 gwei tip), a new nonce each time',
    work:
      'Transaction.from(fields), SigningKey.sign(unsignedHash), serialized, hash; ' +
      'the sender is not recovered',
    library: `ethers ${ethersVersion} (pure JS secp256k1, @noble/curves)`,
    threads,
  };
  if (recoverySeconds > 0) {
    const key = new SigningKey(Wallet.createRandom().privateKey);
    let n = 0;
    // The same work and the key's address from its public key, as signer's signEvmTransaction
    // does since commit 19855e3 (it opens a SigningKey per signature and reads its public key).
    detail['with_address_from_public_key_ops_per_s'] = rateOf(recoverySeconds, () => {
      const tx = transferTransaction(to, n++);
      tx.signature = key.sign(tx.unsignedHash);
      return [computeAddress(key.publicKey), tx.serialized, tx.hash];
    });
    // The same work and `from` read off the signed transaction (a public-key recovery), as
    // signEvmTransaction did before 19855e3.
    detail['with_sender_recovery_ops_per_s'] = rateOf(recoverySeconds, () => {
      const tx = transferTransaction(to, n++);
      tx.signature = key.sign(tx.unsignedHash);
      return [tx.from, tx.serialized, tx.hash];
    });
  }
  return {
    ops,
    seconds: Math.round(longest * 1000) / 1000,
    ops_per_s: Math.round(rate * 10) / 10,
    detail,
  };
}

/** Runs `work` once, then in a loop for `seconds` on this thread; its rate per second (one decimal). */
function rateOf(seconds: number, work: () => unknown): number {
  work();
  const start = process.hrtime.bigint();
  const deadline = start + BigInt(Math.round(seconds * 1e9));
  let count = 0;
  while (process.hrtime.bigint() < deadline) {
    work();
    count++;
  }
  return Math.round((count / (Number(process.hrtime.bigint() - start) / 1e9)) * 10) / 10;
}

/** Signs `count` transfers to `to` for each wallet from its nonce, spread over `threads` workers. */
async function presign(
  wallets: Array<{ privateKey: string }>,
  fromNonces: number[],
  count: number,
  threads: number,
  to: string,
): Promise<string[][]> {
  const chunks = Array.from({ length: Math.max(1, Math.min(threads, wallets.length)) }, () => [] as number[]);
  wallets.forEach((_, k) => chunks[k % chunks.length]!.push(k));
  const out: string[][] = [];
  await Promise.all(
    chunks.map(async (members) => {
      const a = await inWorker({
        mode: 'presign',
        to,
        accounts: members.map((k) => ({
          privateKey: wallets[k]!.privateKey,
          fromNonce: fromNonces[k]!,
          count,
        })),
      });
      if (a.mode !== 'presign') throw new Error('sign worker answered another task');
      members.forEach((k, j) => (out[k] = a.signed[j]!));
    }),
  );
  return out;
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

/** A JSON-RPC answer with a result (anvil answers a refused transaction with HTTP 200 and an error). */
function hasResult(body: Buffer): boolean {
  try {
    return typeof (JSON.parse(body.toString()) as { result?: unknown }).result === 'string';
  } catch {
    return false;
  }
}

/**
 * The broadcast ceiling of `eth-transfer`: pre-signed EIP-1559 transfers sent with
 * `eth_sendRawTransaction` straight to the mesh's anvil (automining), by this benchmark's own
 * closed-loop generator with `concurrency` keep-alive connections: what the chain node takes with
 * nothing in front of it. `concurrency` fresh accounts funded with `anvil_setBalance`, one per
 * connection: each sends its account's next nonce when the last one was answered. An answer counts
 * when it carries the transaction's hash (a JSON-RPC error is `refused_in_body` and fails the
 * ceiling). A warm-up of at most a second (16 transfers per account, other accounts) sizes the
 * supply of the measured `seconds`, signed beforehand on `threads` worker threads, not timed;
 * should it run out first, the run ends there and `detail.supply_ran_out` says so. Anvil answers
 * before it mines: afterwards the benchmark mines its pool empty and reports how many of the
 * answered transfers made it into blocks (`detail.mined`).
 */
export async function anvilRawSend(
  anvilUrl: string,
  opts: { concurrency: number; seconds: number; threads: number; anvilPid?: number; database?: string },
): Promise<Ceiling & { latency_ms: LatencySummary; cpu?: CpuUsage }> {
  const n = opts.concurrency;
  const warmWallets = Array.from({ length: n }, () => Wallet.createRandom());
  const wallets = Array.from({ length: n }, () => Wallet.createRandom());
  const addresses = wallets.map((w) => w.address);
  await eachLimited([...warmWallets, ...wallets], 8, (w) => fund(anvilUrl, w.address, 10n ** 24n));
  const to = Wallet.createRandom().address;
  const headers = { 'content-type': 'application/json', accept: 'application/json' };
  let supplied = 0;
  const supplyOf = (signed: string[][]) => {
    const bodies = signed.map((list) =>
      list.map((raw, k) => Buffer.from(rpcBody('eth_sendRawTransaction', [raw], k + 1))),
    );
    supplied = sum(bodies.map((b) => b.length));
    // Loop k sends account k's transfers in nonce order, each after the last one's answer (sent
    // out of order, a transfer would wait in anvil's pool for its predecessor).
    const next = bodies.map(() => 0);
    return (_i: number, loop: number): LoadRequest | undefined => {
      const body = bodies[loop]?.[next[loop]!];
      if (!body) return undefined;
      next[loop]!++;
      return { method: 'POST', path: '/', headers, body };
    };
  };
  const zeros = wallets.map(() => 0);
  const load = new LoadGenerator(anvilUrl, n, hasResult);
  try {
    const warm = await load.run(1, supplyOf(await presign(warmWallets, zeros, 16, opts.threads, to)));
    if (warm.ok !== warm.requests)
      throw new Error(`anvil refused warm-up transfers: ${JSON.stringify(warm.statuses)}`);
    await settlePool(anvilUrl);
    const per = presignPerAccount(warm.rps, opts.seconds, n, 2);
    const supply = supplyOf(await presign(wallets, zeros, per, opts.threads, to));
    const labelled = new Map<string, number>([['load-generator', process.pid]]);
    if (opts.anvilPid !== undefined) labelled.set('anvil', opts.anvilPid);
    const before = cpuSnapshot(labelled, opts.database);
    const r = await load.run(opts.seconds, supply);
    const after = cpuSnapshot(labelled, opts.database);
    if (r.ok !== r.requests) {
      throw new Error(
        `anvil: ${r.ok} of ${r.requests} raw transfers accepted (${JSON.stringify(r.statuses)})`,
      );
    }
    const emptied = await settlePool(anvilUrl);
    const mined = sum(await Promise.all(addresses.map((a) => nonceOf(anvilUrl, a))));
    return {
      ops: r.ok,
      seconds: r.seconds,
      ops_per_s: r.rps,
      latency_ms: r.latency_ms,
      cpu: cpuBetween(before, after, r.rps),
      detail: {
        call: 'eth_sendRawTransaction of a pre-signed EIP-1559 transfer, answered with its hash',
        node: 'the mesh’s anvil, automining (it answers before mining; flooded, it mines behind)',
        accounts: n,
        concurrency: n,
        presigned: supplied,
        supply_ran_out: r.requests >= supplied,
        mined,
        not_mined: r.ok - mined,
        pool_emptied_after: emptied,
      },
    };
  } finally {
    load.close();
  }
}
