/**
 * A worker thread of the signing ceilings (evm-ceilings.ts): `rate` signs the bench transfer in a
 * closed loop for a while and reports how many it signed; `presign` signs transfers of given keys
 * from given nonces (the raw-broadcast ceiling's supply) and returns them serialized.
 */
import { randomBytes } from 'node:crypto';
import { parentPort, workerData } from 'node:worker_threads';
import { SigningKey } from 'ethers';
import { signTransfer } from './evm-fns.js';

/** What a worker is asked. */
export type SignWorkerTask =
  | { mode: 'rate'; warmupS: number; seconds: number; to: string }
  | {
      mode: 'presign';
      to: string;
      accounts: Array<{ privateKey: string; fromNonce: number; count: number }>;
    };

/** What a worker answers. */
export type SignWorkerAnswer =
  | { mode: 'rate'; ops: number; seconds: number }
  | { mode: 'presign'; signed: string[][] };

/** Signs the transfer with fresh nonces for `seconds`; ops and the exact elapsed seconds. */
export function signLoop(key: SigningKey, to: string, seconds: number): { ops: number; seconds: number } {
  let ops = 0;
  const start = process.hrtime.bigint();
  const deadline = start + BigInt(Math.round(seconds * 1e9));
  while (process.hrtime.bigint() < deadline) {
    for (let k = 0; k < 16; k++) signTransfer(key, to, ops++);
  }
  return { ops, seconds: Number(process.hrtime.bigint() - start) / 1e9 };
}

function run(task: SignWorkerTask): SignWorkerAnswer {
  if (task.mode === 'rate') {
    const key = new SigningKey(`0x${randomBytes(32).toString('hex')}`);
    if (task.warmupS > 0) signLoop(key, task.to, task.warmupS);
    return { mode: 'rate', ...signLoop(key, task.to, task.seconds) };
  }
  return {
    mode: 'presign',
    signed: task.accounts.map((a) => {
      const key = new SigningKey(a.privateKey);
      return Array.from({ length: a.count }, (_, k) => signTransfer(key, task.to, a.fromNonce + k).signedTx);
    }),
  };
}

if (parentPort) parentPort.postMessage(run(workerData as SignWorkerTask));
