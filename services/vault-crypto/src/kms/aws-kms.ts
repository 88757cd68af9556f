import {
  DecryptCommand,
  DescribeKeyCommand,
  EncryptCommand,
  IncorrectKeyException,
  InvalidCiphertextException,
  KMSClient,
  KMSServiceException,
} from '@aws-sdk/client-kms';
import { KeyUnwrapError, KmsUnavailableError } from './kms-errors.js';
import type { KmsProvider } from './kms-types.js';

// Wrapped form: `version(1) | CiphertextBlob`. The blob names the KMS key and its backing-key
// version itself, so AWS-side rotation needs no change here; the byte lets the format evolve.
const FORMAT_V1 = 1;

/** Settings of an AwsKms provider (see kms-config.ts). */
export interface AwsKmsOptions {
  /** Key id, key ARN, alias name (`alias/...`) or alias ARN of a symmetric ENCRYPT_DECRYPT key. */
  keyId: string;
  region: string;
  /** Endpoint URL instead of the public regional one (VPC endpoint, LocalStack, moto). */
  endpoint?: string | undefined;
  /** Deadline of one KMS call, retries included. */
  timeoutMs: number;
}

/**
 * AWS KMS provider: Encrypt/Decrypt with one symmetric key; the caller's context is bound as the
 * encryption context `{custos: context}`, so a wrapped key only opens under the same context (and
 * CloudTrail records which org key was unwrapped). Credentials come from the SDK's default chain.
 */
export class AwsKms implements KmsProvider {
  readonly name = 'aws-kms';
  private readonly client: KMSClient;

  constructor(private readonly options: AwsKmsOptions) {
    this.client = new KMSClient({
      region: options.region,
      ...(options.endpoint ? { endpoint: options.endpoint } : {}),
      maxAttempts: 3,
      requestHandler: { connectionTimeout: options.timeoutMs, requestTimeout: options.timeoutMs },
    });
  }

  async wrapKey(dataKey: Buffer, context: string): Promise<Buffer> {
    const out = await this.call('Encrypt', (signal) =>
      this.client.send(
        new EncryptCommand({
          KeyId: this.options.keyId,
          Plaintext: dataKey,
          EncryptionContext: { custos: context },
        }),
        { abortSignal: signal },
      ),
    );
    if (!out.CiphertextBlob)
      throw new KmsUnavailableError(this.name, 'Encrypt', 'no ciphertext in the reply');
    return Buffer.concat([Buffer.from([FORMAT_V1]), out.CiphertextBlob]);
  }

  async unwrapKey(wrapped: Buffer, context: string): Promise<Buffer> {
    if (wrapped.length < 2 || wrapped[0] !== FORMAT_V1) throw new KeyUnwrapError();
    const out = await this.call('Decrypt', (signal) =>
      this.client.send(
        new DecryptCommand({
          // Pinning the key: a blob made under any other key the role may use is refused.
          KeyId: this.options.keyId,
          CiphertextBlob: wrapped.subarray(1),
          EncryptionContext: { custos: context },
        }),
        { abortSignal: signal },
      ),
    );
    if (!out.Plaintext) throw new KmsUnavailableError(this.name, 'Decrypt', 'no plaintext in the reply');
    const key = Buffer.from(out.Plaintext);
    out.Plaintext.fill(0);
    return key;
  }

  /** DescribeKey: the key exists, this role may see it, and it is an enabled symmetric key. */
  async health(signal: AbortSignal): Promise<void> {
    const out = await this.call(
      'DescribeKey',
      (s) => this.client.send(new DescribeKeyCommand({ KeyId: this.options.keyId }), { abortSignal: s }),
      signal,
    );
    const meta = out.KeyMetadata;
    if (!meta) throw new Error('DescribeKey returned no key metadata');
    if (meta.KeyState !== 'Enabled') throw new Error(`KMS key ${meta.KeyId} is ${meta.KeyState}`);
    const usage = meta.KeyUsage ?? 'ENCRYPT_DECRYPT';
    if (usage !== 'ENCRYPT_DECRYPT' || (meta.KeySpec ?? 'SYMMETRIC_DEFAULT') !== 'SYMMETRIC_DEFAULT') {
      throw new Error(`KMS key ${meta.KeyId} is ${meta.KeySpec}/${usage}, not a symmetric encryption key`);
    }
  }

  async close(): Promise<void> {
    this.client.destroy();
  }

  // Runs one KMS call under the deadline. A refused ciphertext (wrong context, tampered, another
  // key) is a KeyUnwrapError; every other failure a KmsUnavailableError whose text is the AWS error
  // name and message (never a request body, so never key material).
  private async call<T>(
    operation: string,
    send: (signal: AbortSignal) => Promise<T>,
    outer?: AbortSignal,
  ): Promise<T> {
    const deadline = AbortSignal.timeout(this.options.timeoutMs);
    const signal = outer ? AbortSignal.any([outer, deadline]) : deadline;
    try {
      return await send(signal);
    } catch (err) {
      if (err instanceof InvalidCiphertextException || err instanceof IncorrectKeyException) {
        throw new KeyUnwrapError();
      }
      throw new KmsUnavailableError(this.name, operation, describeAwsFailure(err, signal, this.options));
    }
  }
}

function describeAwsFailure(err: unknown, signal: AbortSignal, options: AwsKmsOptions): string {
  if (signal.aborted) return `no answer within ${options.timeoutMs} ms`;
  if (err instanceof KMSServiceException) return `${err.name}: ${err.message}`;
  if (err instanceof Error) {
    // A socket error's code (ECONNREFUSED, ENOTFOUND, ETIMEDOUT); the SDK may have wrapped it.
    const own = (err as { code?: unknown }).code;
    const code = typeof own === 'string' ? own : /\b(E[A-Z_]{4,})\b/.exec(err.message)?.[1];
    const where = options.endpoint ?? `KMS in ${options.region}`;
    return typeof code === 'string' ? `${code} reaching ${where}` : `${err.name}: ${err.message}`;
  }
  return 'unknown error';
}
