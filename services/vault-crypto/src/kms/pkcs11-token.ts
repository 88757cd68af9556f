import { ConfigError, type Logger } from '@custos/service-kit';
import {
  KeyGenMechanism,
  KeyType,
  Module,
  ObjectClass,
  type SecretKey,
  type Session,
  SessionFlag,
  type Slot,
  UserType,
} from 'graphene-pk11';

/** Where the provider key lives on a PKCS#11 token (see kms-config.ts). */
export interface Pkcs11TokenOptions {
  /** Path of the PKCS#11 module (shared library). */
  library: string;
  /** Slot id; `tokenLabel` is used when it is absent. */
  slot?: number | undefined;
  tokenLabel?: string | undefined;
  pin: string;
  /** The variable the PIN came from, named in a login failure. */
  pinVariable: 'PKCS11_PIN' | 'PKCS11_PIN_FILE';
  keyLabel: string;
  /** Create the key when no key has the label (first start). */
  generateKey: boolean;
}

/** A logged-in session and the provider key it found. */
export interface Pkcs11Handle {
  session: Session;
  key: SecretKey;
  /** "token <label> (slot <id>)", for logs and errors. */
  where: string;
}

/** The PKCS#11 return-value name (`CKR_PIN_INCORRECT`) of a pkcs11js error, if it is one. */
export function ckrName(err: unknown): string | undefined {
  if (!(err instanceof Error)) return undefined;
  return /^CKR_[A-Z0-9_]+/.exec(err.message)?.[0];
}

// One loaded module per library path: C_Initialize/C_Finalize and the login state are global to
// the process, so two providers on the same module (tests) must not finalize under each other.
const modules = new Map<string, { module: Module; users: number }>();

/** Loads and initializes the module once per process; pair every call with releaseModule. */
export function acquireModule(library: string): Module {
  const held = modules.get(library);
  if (held) {
    held.users += 1;
    return held.module;
  }
  let module: Module;
  try {
    module = Module.load(library, 'custos-kms');
    module.initialize();
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new ConfigError([{ variable: 'PKCS11_LIBRARY', reason: `cannot load the module: ${reason}` }]);
  }
  modules.set(library, { module, users: 1 });
  return module;
}

/** How many providers hold the module at `library` now. */
export function moduleUsers(library: string): number {
  return modules.get(library)?.users ?? 0;
}

/** Drops one user of the module; the last one finalizes and unloads it. True if it was the last. */
export function releaseModule(library: string): boolean {
  const held = modules.get(library);
  if (!held) return false;
  held.users -= 1;
  if (held.users > 0) return false;
  modules.delete(library);
  try {
    held.module.finalize();
    held.module.close();
  } catch {
    // Shutting down; nothing left to use the module.
  }
  return true;
}

/** The slot id that `softhsm2-util --show-slots` and `pkcs11-tool -L` print. */
function slotId(slot: Slot): bigint {
  const h = slot.handle;
  return h.length >= 8 ? h.readBigUInt64LE(0) : BigInt(h.readUInt32LE(0));
}

function tokenLabel(slot: Slot): string {
  return slot.getToken().label.trim();
}

function findSlot(module: Module, options: Pkcs11TokenOptions): Slot {
  const slots = module.getSlots(true);
  const all: Slot[] = [];
  for (let i = 0; i < slots.length; i++) all.push(slots.items(i));
  const labels = all.map((s) => `${JSON.stringify(tokenLabel(s))} (slot ${slotId(s)})`).join(', ') || 'none';
  if (options.slot !== undefined) {
    const slot = all.find((s) => slotId(s) === BigInt(options.slot ?? -1));
    if (!slot) {
      throw new ConfigError([
        {
          variable: 'PKCS11_SLOT',
          reason: `no initialized token in slot ${options.slot}; tokens: ${labels}`,
        },
      ]);
    }
    if (options.tokenLabel !== undefined && tokenLabel(slot) !== options.tokenLabel) {
      throw new ConfigError([
        {
          variable: 'PKCS11_TOKEN_LABEL',
          reason: `the token in slot ${options.slot} is labelled ${JSON.stringify(tokenLabel(slot))}`,
        },
      ]);
    }
    return slot;
  }
  const matching = all.filter((s) => tokenLabel(s) === options.tokenLabel);
  if (matching.length !== 1) {
    const reason =
      matching.length === 0
        ? `no token labelled ${JSON.stringify(options.tokenLabel)}; tokens: ${labels}`
        : `${matching.length} tokens are labelled ${JSON.stringify(options.tokenLabel)}; set PKCS11_SLOT`;
    throw new ConfigError([{ variable: 'PKCS11_TOKEN_LABEL', reason }]);
  }
  return matching[0]!;
}

function login(session: Session, options: Pkcs11TokenOptions): void {
  try {
    session.login(options.pin, UserType.USER);
  } catch (err) {
    const ckr = ckrName(err);
    // Login state is per process and token: another session of ours already holds it.
    if (ckr === 'CKR_USER_ALREADY_LOGGED_IN') return;
    if (ckr === 'CKR_PIN_INCORRECT' || ckr === 'CKR_PIN_LEN_RANGE' || ckr === 'CKR_PIN_LOCKED') {
      throw new ConfigError([{ variable: options.pinVariable, reason: `token refused the PIN (${ckr})` }]);
    }
    throw err;
  }
}

function generateKey(session: Session, options: Pkcs11TokenOptions): SecretKey {
  return session.generateKey(KeyGenMechanism.AES, {
    class: ObjectClass.SECRET_KEY,
    keyType: KeyType.AES,
    valueLen: 32,
    label: options.keyLabel,
    token: true,
    private: true,
    sensitive: true,
    extractable: false,
    encrypt: true,
    decrypt: true,
    wrap: false,
    unwrap: false,
    sign: false,
    verify: false,
    derive: false,
  });
}

function keyProblem(key: SecretKey): string | undefined {
  const a = key.getAttribute({
    keyType: null,
    valueLen: null,
    sensitive: null,
    extractable: null,
    encrypt: null,
    decrypt: null,
  }) as {
    keyType: number;
    valueLen: number;
    sensitive: boolean;
    extractable: boolean;
    encrypt: boolean;
    decrypt: boolean;
  };
  if (a.keyType !== KeyType.AES || a.valueLen !== 32) return 'is not an AES-256 key';
  if (a.extractable || !a.sensitive)
    return 'must be non-extractable and sensitive (CKA_EXTRACTABLE=false, CKA_SENSITIVE=true)';
  if (!a.encrypt || !a.decrypt) return 'must allow encrypt and decrypt (CKA_ENCRYPT, CKA_DECRYPT)';
  return undefined;
}

function findKey(session: Session, options: Pkcs11TokenOptions, where: string, logger: Logger): SecretKey {
  const template = { class: ObjectClass.SECRET_KEY, label: options.keyLabel };
  let found = session.find(template);
  if (found.length === 0 && options.generateKey) {
    generateKey(session, options);
    logger.warn(
      { keyLabel: options.keyLabel, token: where },
      'PKCS11_GENERATE_KEY: generated a non-extractable AES-256 key on the token; back the token up now',
    );
    found = session.find(template);
  }
  if (found.length !== 1) {
    const reason =
      found.length === 0
        ? `no secret key with this label on ${where}; create one or start once with PKCS11_GENERATE_KEY=true`
        : `${found.length} secret keys on ${where} have this label; it must name exactly one`;
    throw new ConfigError([{ variable: 'PKCS11_KEY_LABEL', reason }]);
  }
  const key = found.items(0).toType<SecretKey>();
  const problem = keyProblem(key);
  if (problem)
    throw new ConfigError([{ variable: 'PKCS11_KEY_LABEL', reason: `the key on ${where} ${problem}` }]);
  return key;
}

/**
 * Opens a session on the configured token, logs in, and finds (or, the first time and when asked,
 * generates) the provider key. Bad settings throw a ConfigError naming the variable.
 */
export function openToken(
  module: Module,
  options: Pkcs11TokenOptions,
  logger: Logger,
  allowGenerate: boolean,
): Pkcs11Handle {
  const slot = findSlot(module, options);
  const where = `token ${JSON.stringify(tokenLabel(slot))} (slot ${slotId(slot)})`;
  const generate = allowGenerate && options.generateKey;
  const flags = SessionFlag.SERIAL_SESSION | (generate ? SessionFlag.RW_SESSION : 0);
  const session = slot.open(flags);
  try {
    login(session, options);
    const key = findKey(session, { ...options, generateKey: generate }, where, logger);
    return { session, key, where };
  } catch (err) {
    try {
      session.close();
    } catch {
      // The session is being abandoned anyway.
    }
    throw err;
  }
}
