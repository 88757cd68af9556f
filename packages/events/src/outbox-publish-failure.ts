/**
 * Why a JetStream publish of an outbox row failed, in a few bounded classes (a metric label):
 * - `stream_full`: the stream refused it for a limit (NATS_STREAM_MAX_BYTES with discard new, or a
 *   server out of JetStream storage). Normal while the stream is full; can last until room is made.
 * - `no_responders`: nobody answered the publish (JetStream disabled, or the stream has no leader).
 * - `timeout`: no acknowledgement in time (the message may or may not have been stored).
 * - `other`: anything else (permissions, a payload over max_payload, a closed connection …).
 */
export type PublishFailureReason = 'stream_full' | 'no_responders' | 'timeout' | 'other';

/** Every PublishFailureReason, for exporting each as zero from the start. */
export const PUBLISH_FAILURE_REASONS: readonly PublishFailureReason[] = [
  'stream_full',
  'no_responders',
  'timeout',
  'other',
];

// NATS server texts for a message refused by a stream limit (discard new) or storage exhaustion.
const STREAM_FULL =
  /maximum (bytes|messages|messages per subject) exceeded|insufficient resources|(resource|storage) limits? exceeded/i;

/** Classifies a publish error, following its `cause` chain (nats.js wraps no-responders). */
export function publishFailureReason(err: unknown): PublishFailureReason {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e.name === 'NoResponders' || e.name === 'NoRespondersError') return 'no_responders';
    if (e.name === 'TimeoutError') return 'timeout';
    if (STREAM_FULL.test(e.message)) return 'stream_full';
  }
  return 'other';
}

/**
 * The wait before the `failures`-th consecutive failed cycle is retried: `baseMs` doubled per
 * failure, at most `capMs`.
 */
export function publishBackoffMs(failures: number, baseMs: number, capMs: number): number {
  if (failures <= 0) return 0;
  return Math.min(capMs, baseMs * 2 ** Math.min(failures - 1, 30));
}
