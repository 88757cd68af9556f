import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError, createLogger } from '@custos/service-kit';
import {
  KeyGenMechanism,
  KeyType,
  ObjectClass,
  type SecretKey,
  type Session,
  SessionFlag,
  UserType,
} from 'graphene-pk11';
import { KeyUnwrapError, KmsUnavailableError } from '../src/kms/kms-errors';
import { createKmsProvider, type KmsSettings } from '../src/kms/kms-factory';
import { checkKmsHealth } from '../src/kms/kms-fns';
import type { KmsProvider } from '../src/kms/kms-types';
import { acquireModule, releaseModule } from '../src/kms/pkcs11-token';

// PKCS#11 provider against SoftHSM 2 (Debian package softhsm2; tools/dev/ensure-infra.sh installs
// it). Its tokens live in the private SOFTHSM2_CONF that test/kms-softhsm-setup.cjs makes; without
// SoftHSM the suite fails, saying so.

const LIBRARY = process.env.SOFTHSM2_LIBRARY ?? '/usr/lib/softhsm/libsofthsm2.so';
const PIN = '246810';
const SO_PIN = '13579111';
const TOKEN = 'custos-kms-test';
const KEY = 'custos-kek';
const logger = createLogger({ service: 'vault-crypto-test', level: 'silent' });

function requireSoftHsm(): void {
  const problems: string[] = [];
  if (!existsSync(LIBRARY)) problems.push(`${LIBRARY} is missing`);
  try {
    execFileSync('softhsm2-util', ['--version'], { stdio: 'ignore' });
  } catch {
    problems.push('softhsm2-util is not on PATH');
  }
  if (problems.length > 0) {
    throw new Error(
      `SoftHSM 2 is needed for the PKCS#11 tests (${problems.join('; ')}): ` +
        'run `bash tools/dev/ensure-infra.sh` or `apt-get install softhsm2`',
    );
  }
}

/** The slot id softhsm2-util assigned to the token it just initialized. */
function initToken(label: string): number {
  const out = execFileSync(
    'softhsm2-util',
    ['--init-token', '--free', '--label', label, '--pin', PIN, '--so-pin', SO_PIN],
    { encoding: 'utf8', env: process.env },
  );
  const slot = /reassigned to slot (\d+)/.exec(out)?.[1];
  if (!slot) throw new Error(`unexpected softhsm2-util output: ${out}`);
  return Number(slot);
}

/** Runs `fn` in a session of the test's own on the token, sharing the provider's loaded module. */
function withTokenSession<T>(label: string, fn: (session: Session) => T): T {
  const module = acquireModule(LIBRARY);
  try {
    const slots = module.getSlots(true);
    for (let i = 0; i < slots.length; i++) {
      const slot = slots.items(i);
      if (slot.getToken().label.trim() !== label) continue;
      const session = slot.open(SessionFlag.SERIAL_SESSION | SessionFlag.RW_SESSION);
      try {
        try {
          session.login(PIN, UserType.USER);
        } catch (err) {
          if (!(err instanceof Error) || !err.message.startsWith('CKR_USER_ALREADY_LOGGED_IN')) throw err;
        }
        return fn(session);
      } finally {
        try {
          session.close();
        } catch {
          // Already closed by fn (closeAll).
        }
      }
    }
    throw new Error(`no token ${label}`);
  } finally {
    releaseModule(LIBRARY);
  }
}

describe('pkcs11 provider against SoftHSM', () => {
  let slotId: number;
  let pinFile: string;
  let kms: KmsProvider;

  const settings = (over: Partial<KmsSettings> = {}): KmsSettings => ({
    KMS_PROVIDER: 'pkcs11',
    PKCS11_LIBRARY: LIBRARY,
    PKCS11_TOKEN_LABEL: TOKEN,
    PKCS11_PIN_FILE: pinFile,
    PKCS11_KEY_LABEL: KEY,
    ...over,
  });

  beforeAll(async () => {
    requireSoftHsm();
    const conf = process.env.SOFTHSM2_CONF;
    if (!conf || !existsSync(conf)) {
      throw new Error(
        'SOFTHSM2_CONF is not set: run through jest.config.cjs, whose globalSetup makes a private token folder',
      );
    }
    slotId = initToken(TOKEN);
    initToken('custos-other');
    pinFile = path.join(path.dirname(conf), 'pin');
    writeFileSync(pinFile, `${PIN}\n`, { mode: 0o600 });
    kms = await createKmsProvider(settings({ PKCS11_GENERATE_KEY: true }), logger);
  });

  afterAll(async () => {
    await kms?.close?.();
  });

  it('generates a non-extractable, sensitive AES-256 key on the token at first start', () => {
    const attrs = withTokenSession(TOKEN, (session) => {
      const found = session.find({ class: ObjectClass.SECRET_KEY, label: KEY });
      expect(found.length).toBe(1);
      const key = found.items(0).toType<SecretKey>();
      let valueReadable = true;
      try {
        key.getAttribute({ value: null });
      } catch (err) {
        valueReadable = !(err instanceof Error && err.message.startsWith('CKR_ATTRIBUTE_SENSITIVE'));
      }
      return {
        ...(key.getAttribute({
          keyType: null,
          valueLen: null,
          extractable: null,
          sensitive: null,
          token: null,
        }) as Record<string, unknown>),
        valueReadable,
      };
    });
    expect(attrs).toEqual({
      keyType: KeyType.AES,
      valueLen: 32,
      extractable: false,
      sensitive: true,
      token: true,
      valueReadable: false,
    });
  });

  it('wraps and unwraps with AES-GCM on the token in the format version | iv | ciphertext+tag', async () => {
    const dataKey = randomBytes(32);
    const wrapped = await kms.wrapKey(dataKey, 'custos:org-kek:o1:1');
    expect(wrapped[0]).toBe(1);
    expect(wrapped.length).toBe(1 + 12 + 32 + 16);
    expect(wrapped.includes(dataKey)).toBe(false);
    expect(await kms.unwrapKey(wrapped, 'custos:org-kek:o1:1')).toEqual(dataKey);
  });

  it('refuses another context and tampered bytes', async () => {
    const wrapped = await kms.wrapKey(randomBytes(32), 'custos:org-kek:o1:1');
    await expect(kms.unwrapKey(wrapped, 'custos:org-kek:o2:1')).rejects.toBeInstanceOf(KeyUnwrapError);
    for (const at of [0, 1, 13, wrapped.length - 1]) {
      const tampered = Buffer.from(wrapped);
      tampered[at]! ^= 1;
      await expect(kms.unwrapKey(tampered, 'custos:org-kek:o1:1')).rejects.toBeInstanceOf(KeyUnwrapError);
    }
    await expect(kms.unwrapKey(wrapped.subarray(0, 20), 'custos:org-kek:o1:1')).rejects.toBeInstanceOf(
      KeyUnwrapError,
    );
    // The provider still serves after the refusals.
    const dataKey = randomBytes(32);
    expect(await kms.unwrapKey(await kms.wrapKey(dataKey, 'c'), 'c')).toEqual(dataKey);
  });

  it('serves many concurrent calls over its one session', async () => {
    const keys = Array.from({ length: 40 }, () => randomBytes(32));
    const wrapped = await Promise.all(keys.map((k, i) => kms.wrapKey(k, `ctx:${i}`)));
    const back = await Promise.all(wrapped.map((w, i) => kms.unwrapKey(w, `ctx:${i}`)));
    expect(back).toEqual(keys);
  });

  it('is healthy by an encrypt/decrypt probe', async () => {
    expect(await checkKmsHealth(kms)).toMatchObject({ healthy: true, detail: '' });
  });

  it('finds the same key after a restart (by slot id and PIN), without generating another', async () => {
    const dataKey = randomBytes(32);
    const wrapped = await kms.wrapKey(dataKey, 'restart');
    const again = await createKmsProvider(
      settings({
        PKCS11_TOKEN_LABEL: undefined,
        PKCS11_SLOT: slotId,
        PKCS11_PIN_FILE: undefined,
        PKCS11_PIN: PIN,
      }),
      logger,
    );
    try {
      expect(await again.unwrapKey(wrapped, 'restart')).toEqual(dataKey);
    } finally {
      await again.close?.();
    }
    expect(withTokenSession(TOKEN, (s) => s.find({ class: ObjectClass.SECRET_KEY, label: KEY }).length)).toBe(
      1,
    );
  });

  it('re-opens its session after the token dropped it', async () => {
    // Closing every session of the slot invalidates the provider's handle behind its back.
    withTokenSession(TOKEN, (session) => session.slot.closeAll());
    const dataKey = randomBytes(32);
    const first = await kms.wrapKey(dataKey, 'c').catch((e: unknown) => e);
    expect(first).toBeInstanceOf(KmsUnavailableError);
    expect((first as Error).message).toBe(
      'key-management provider pkcs11: encrypt failed: CKR_SESSION_HANDLE_INVALID',
    );
    expect(await kms.unwrapKey(await kms.wrapKey(dataKey, 'c'), 'c')).toEqual(dataKey);
  });

  it('fails to start naming the variable at fault', async () => {
    const startError = (over: Partial<KmsSettings>) =>
      createKmsProvider(settings(over), logger).then(
        async (p) => {
          await p.close?.();
          throw new Error('provider started');
        },
        (err: unknown) => err,
      );
    const expectProblem = async (over: Partial<KmsSettings>, variable: string, reason: RegExp) => {
      const err = await startError(over);
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).problems).toEqual([{ variable, reason: expect.stringMatching(reason) }]);
    };
    await expectProblem({ PKCS11_LIBRARY: '/nonexistent/libpkcs11.so' }, 'PKCS11_LIBRARY', /cannot load/);
    await expectProblem({ PKCS11_TOKEN_LABEL: 'nope' }, 'PKCS11_TOKEN_LABEL', /no token labelled "nope"/);
    await expectProblem({ PKCS11_TOKEN_LABEL: undefined, PKCS11_SLOT: 4242 }, 'PKCS11_SLOT', /slot 4242/);
    await expectProblem(
      { PKCS11_SLOT: slotId, PKCS11_TOKEN_LABEL: 'custos-other' },
      'PKCS11_TOKEN_LABEL',
      /labelled/,
    );
    await expectProblem(
      { PKCS11_TOKEN_LABEL: 'custos-other' },
      'PKCS11_KEY_LABEL',
      /PKCS11_GENERATE_KEY=true/,
    );
    // On custos-other: login state is per process and token, and the suite's provider holds TOKEN's.
    await expectProblem(
      { PKCS11_TOKEN_LABEL: 'custos-other', PKCS11_PIN_FILE: undefined, PKCS11_PIN: '000000' },
      'PKCS11_PIN',
      /CKR_PIN_INCORRECT/,
    );
  });

  it('refuses a key that could leave the token', async () => {
    withTokenSession('custos-other', (session) =>
      session.generateKey(KeyGenMechanism.AES, {
        class: ObjectClass.SECRET_KEY,
        keyType: KeyType.AES,
        valueLen: 32,
        label: 'weak',
        token: true,
        private: true,
        sensitive: false,
        extractable: true,
        encrypt: true,
        decrypt: true,
      }),
    );
    const err = await createKmsProvider(
      settings({ PKCS11_TOKEN_LABEL: 'custos-other', PKCS11_KEY_LABEL: 'weak' }),
      logger,
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).message).toMatch(/PKCS11_KEY_LABEL: .*must be non-extractable and sensitive/);
  });

  it('refuses calls once closed', async () => {
    const other = await createKmsProvider(settings(), logger);
    await other.close?.();
    await expect(other.wrapKey(randomBytes(32), 'c')).rejects.toThrow(
      'pkcs11: encrypt failed: provider is closed',
    );
    // The shared provider is untouched by the other one's logout and close.
    const dataKey = randomBytes(32);
    expect(await kms.unwrapKey(await kms.wrapKey(dataKey, 'c'), 'c')).toEqual(dataKey);
  });
});
