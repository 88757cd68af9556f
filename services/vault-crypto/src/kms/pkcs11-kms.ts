import { randomBytes } from 'node:crypto';
import type { Logger } from '@custos/service-kit';
import { AesGcmParams, type Module } from 'graphene-pk11';
import { KeyUnwrapError, KmsUnavailableError } from './kms-errors.js';
import type { KmsProvider } from './kms-types.js';
import {
  acquireModule,
  ckrName,
  moduleUsers,
  openToken,
  type Pkcs11Handle,
  type Pkcs11TokenOptions,
  releaseModule,
} from './pkcs11-token.js';

// Wrapped form: `version(1) | iv(12) | ciphertext | tag(16)`, AES-256-GCM on the token with the
// caller's context as associated data.
const FORMAT_V1 = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;

// Return values after which the session (or the token behind it) is gone: drop it, report the
// provider unavailable, and open a new one on the next call.
const SESSION_LOST = new Set([
  'CKR_SESSION_HANDLE_INVALID',
  'CKR_SESSION_CLOSED',
  'CKR_DEVICE_REMOVED',
  'CKR_DEVICE_ERROR',
  'CKR_TOKEN_NOT_PRESENT',
  'CKR_TOKEN_NOT_RECOGNIZED',
  'CKR_USER_NOT_LOGGED_IN',
  'CKR_KEY_HANDLE_INVALID',
  'CKR_OBJECT_HANDLE_INVALID',
  'CKR_CRYPTOKI_NOT_INITIALIZED',
]);

// Return values of a decryption that mean "these bytes do not open under this key and context".
// SoftHSM reports a failed GCM tag check as CKR_GENERAL_ERROR.
const REFUSED = new Set([
  'CKR_ENCRYPTED_DATA_INVALID',
  'CKR_ENCRYPTED_DATA_LEN_RANGE',
  'CKR_GENERAL_ERROR',
  'CKR_FUNCTION_FAILED',
]);

type Op = 'encrypt' | 'decrypt';

/**
 * PKCS#11 provider (HSMs, SoftHSM): AES-256-GCM with a non-extractable key that never leaves the
 * token. One logged-in session is reused; PKCS#11 allows one operation at a time per session, so
 * calls are queued. The native calls run off the event loop (pkcs11js async variants).
 */
export class Pkcs11Kms implements KmsProvider {
  readonly name = 'pkcs11';
  private handle: Pkcs11Handle | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  private constructor(
    private readonly module: Module,
    private readonly options: Pkcs11TokenOptions,
    private readonly logger: Logger,
    handle: Pkcs11Handle,
  ) {
    this.handle = handle;
  }

  /** Loads the module, logs in and finds (or generates) the key; a bad setting throws a ConfigError. */
  static open(options: Pkcs11TokenOptions, logger: Logger): Pkcs11Kms {
    const module = acquireModule(options.library);
    try {
      const handle = openToken(module, options, logger, true);
      logger.info({ token: handle.where, keyLabel: options.keyLabel }, 'pkcs11: logged in, key found');
      return new Pkcs11Kms(module, options, logger, handle);
    } catch (err) {
      releaseModule(options.library);
      throw err;
    }
  }

  async wrapKey(dataKey: Buffer, context: string): Promise<Buffer> {
    const iv = randomBytes(IV_BYTES);
    const sealed = await this.run('encrypt', (h) => {
      const mech = {
        name: 'AES_GCM',
        params: new AesGcmParams(iv, Buffer.from(context, 'utf8'), TAG_BYTES * 8),
      };
      const cipher = h.session.createCipher(mech, h.key);
      return new Promise<Buffer>((resolve, reject) => {
        cipher.once(dataKey, Buffer.alloc(dataKey.length + TAG_BYTES), (err, out) =>
          err ? reject(err) : resolve(out),
        );
      });
    });
    return Buffer.concat([Buffer.from([FORMAT_V1]), iv, sealed]);
  }

  async unwrapKey(wrapped: Buffer, context: string): Promise<Buffer> {
    if (wrapped.length < 1 + IV_BYTES + TAG_BYTES || wrapped[0] !== FORMAT_V1) throw new KeyUnwrapError();
    const iv = wrapped.subarray(1, 1 + IV_BYTES);
    const sealed = wrapped.subarray(1 + IV_BYTES);
    return this.run('decrypt', (h) => {
      const mech = {
        name: 'AES_GCM',
        params: new AesGcmParams(iv, Buffer.from(context, 'utf8'), TAG_BYTES * 8),
      };
      const decipher = h.session.createDecipher(mech, h.key);
      return new Promise<Buffer>((resolve, reject) => {
        decipher.once(sealed, Buffer.alloc(sealed.length), (err, out) => (err ? reject(err) : resolve(out)));
      });
    });
  }

  /** Waits for calls in flight, logs out, closes the session and finalizes the module. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.queue.catch(() => undefined);
    const handle = this.handle;
    this.handle = undefined;
    // Login state belongs to the process: log out only when no other provider shares the module.
    if (handle) this.dropSession(handle, moduleUsers(this.options.library) === 1);
    releaseModule(this.options.library);
  }

  // Queues `fn` behind the calls in flight, with a session (re-opened after a loss).
  private run<T>(op: Op, fn: (h: Pkcs11Handle) => Promise<T>): Promise<T> {
    const next = this.queue.then(async () => {
      if (this.closed) throw new KmsUnavailableError(this.name, op, 'provider is closed');
      const handle = this.session(op);
      try {
        return await fn(handle);
      } catch (err) {
        throw this.failure(op, handle, err);
      }
    });
    this.queue = next.catch(() => undefined);
    return next;
  }

  private session(op: Op): Pkcs11Handle {
    if (this.handle) return this.handle;
    try {
      this.handle = openToken(this.module, this.options, this.logger, false);
      this.logger.info({ token: this.handle.where }, 'pkcs11: session re-opened');
      return this.handle;
    } catch (err) {
      throw new KmsUnavailableError(this.name, op, `cannot open a session: ${describe(err)}`);
    }
  }

  private failure(op: Op, handle: Pkcs11Handle, err: unknown): Error {
    const ckr = ckrName(err);
    if (ckr && SESSION_LOST.has(ckr)) {
      this.logger.warn({ token: handle.where, ckr }, 'pkcs11: session lost; re-opening on the next call');
      if (this.handle === handle) this.handle = undefined;
      this.dropSession(handle, false);
      return new KmsUnavailableError(this.name, op, ckr);
    }
    if (op === 'decrypt' && ckr && REFUSED.has(ckr)) return new KeyUnwrapError();
    return new KmsUnavailableError(this.name, op, describe(err));
  }

  // Closes a session (logging out first if asked), ignoring a token that is already gone.
  private dropSession(handle: Pkcs11Handle, logout: boolean): void {
    if (logout) {
      try {
        handle.session.logout();
      } catch {
        // Not logged in any more (token reset), or another session of ours logged out first.
      }
    }
    try {
      handle.session.close();
    } catch {
      // Already invalid.
    }
  }
}

function describe(err: unknown): string {
  return ckrName(err) ?? (err instanceof Error ? err.message : 'unknown error');
}
