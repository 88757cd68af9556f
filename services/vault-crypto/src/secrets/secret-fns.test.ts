import { InvalidArgumentError } from '@custos/service-kit';
import {
  encodeValue,
  generateValue,
  parseEnvBundle,
  checkRotateInput,
  checkSecretInput,
  secretPath,
} from './secret-fns';
import type { SecretRequest } from './secret-types';

const now = new Date('2026-01-01T00:00:00Z');

function fieldOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof InvalidArgumentError) return err.field;
    throw err;
  }
  return undefined;
}

describe('secretPath', () => {
  it.each(['a', 'prod/db/password', 'A-b_c/0'])('accepts %s', (p) => expect(secretPath(p)).toBe(p));
  it.each(['', '/a', 'a/', 'a//b', 'a b', 'a.b', 'é', '../x', 'x'.repeat(513)])(
    'refuses %j naming path',
    (p) => {
      expect(fieldOf(() => secretPath(p))).toBe('path');
    },
  );
});

describe('checkSecretInput', () => {
  const v = (text: string) => Buffer.from(text);
  it('defaults the type to note', () => {
    const s = checkSecretInput({ type: '', value: Buffer.from([0, 255]) }, now);
    expect(s.type).toBe('note');
    expect(s.value).toEqual(Buffer.from([0, 255]));
    expect(s).toMatchObject({ metadata: null, expiresAt: null, maxAccessCount: null, rotationPolicy: null });
  });

  it('keeps the optional fields', () => {
    const s = checkSecretInput(
      {
        type: 'api_key',
        value: v('k'),
        metadata: { a: 1 },
        expiresAt: '2026-02-01T00:00:00Z',
        maxAccessCount: 3,
        rotationPolicy: { days: 30 },
      },
      now,
    );
    expect(s).toMatchObject({
      type: 'api_key',
      metadata: { a: 1 },
      expiresAt: new Date('2026-02-01T00:00:00Z'),
      maxAccessCount: 3,
      rotationPolicy: { days: 30 },
    });
  });

  // The gateway refuses wrong types, unknown fields and bad encodings; these are the rules a
  // direct caller meets.
  it.each([
    [{ type: 'x' }, 'type'],
    [{ metadata: { big: 'x'.repeat(17000) } }, 'metadata'],
    [{ maxAccessCount: 1.5 }, 'max_access_count'],
    [{ maxAccessCount: 0 }, 'max_access_count'],
    [{ expiresAt: '2025-01-01T00:00:00Z' }, 'expires_at'],
    [{ expiresAt: 'tomorrow' }, 'expires_at'],
    [{ value: Buffer.alloc(256 * 1024 + 1) }, 'value'],
    [{ type: 'env_bundle', value: v('[]') }, 'value'],
    [{ type: 'env_bundle', value: v('{"1A":"x"}') }, 'value'],
  ] as Array<[Partial<SecretRequest>, string]>)('refuses %j naming %s', (patch, field) => {
    expect(fieldOf(() => checkSecretInput({ type: 'note', value: v('v'), ...patch }, now))).toBe(field);
  });
});

describe('encodeValue', () => {
  it('answers UTF-8 text when the bytes are valid UTF-8, base64 otherwise', () => {
    expect(encodeValue(Buffer.from('héllo'))).toEqual({ value: 'héllo', encoding: 'utf8' });
    expect(encodeValue(Buffer.from([0xc3]))).toEqual({ value: 'ww==', encoding: 'base64' });
  });
});

describe('env bundles', () => {
  it('parses a JSON object of names to strings', () => {
    expect(parseEnvBundle(Buffer.from('{"A":"1","_B2":""}'))).toEqual({ A: '1', _B2: '' });
  });
});

describe('rotation', () => {
  it('validates the body and generates values of the charset and length', () => {
    expect(checkRotateInput({})).toEqual({ length: 32, charset: 'alphanumeric', type: undefined });
    expect(fieldOf(() => checkRotateInput({ length: 7 }))).toBe('length');
    expect(fieldOf(() => checkRotateInput({ charset: 'x' }))).toBe('charset');
    expect(fieldOf(() => checkRotateInput({ charset: 'toString' }))).toBe('charset');
    expect(fieldOf(() => checkRotateInput({ type: 'env_bundle' }))).toBe('type');
    expect(generateValue({ length: 64, charset: 'hex' }).toString()).toMatch(/^[0-9a-f]{64}$/);
    expect(generateValue({ length: 50, charset: 'alphanumeric' }).toString()).toMatch(/^[A-Za-z0-9]{50}$/);
    expect(generateValue({ length: 50, charset: 'ascii' }).toString()).toMatch(/^[!-~]{50}$/);
    expect(generateValue({ length: 16, charset: 'base64' }).toString()).toMatch(/^[A-Za-z0-9+/]{16}$/);
  });
});

describe('NUL in JSON fields', () => {
  it('refuses metadata and rotation_policy holding U+0000, naming the field', () => {
    const now = new Date();
    const value = Buffer.from('v');
    expect(fieldOf(() => checkSecretInput({ type: '', value, metadata: { a: 'x\u0000' } }, now))).toBe(
      'metadata',
    );
    expect(fieldOf(() => checkSecretInput({ type: '', value, metadata: { ['k\u0000']: 1 } }, now))).toBe(
      'metadata',
    );
    expect(fieldOf(() => checkSecretInput({ type: '', value, rotationPolicy: { d: ['\u0000'] } }, now))).toBe(
      'rotation_policy',
    );
  });
});
