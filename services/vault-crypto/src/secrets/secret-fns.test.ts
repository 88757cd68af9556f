import { InvalidArgumentError } from '@custos/service-kit';
import {
  encodeValue,
  generateValue,
  parseEnvBundle,
  parseRotateInput,
  parseSecretInput,
  secretPath,
} from './secret-fns';

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

describe('parseSecretInput', () => {
  it('defaults the type to note and decodes base64 values', () => {
    const s = parseSecretInput({ value: 'AP8=', value_encoding: 'base64' }, now);
    expect(s.type).toBe('note');
    expect(s.value).toEqual(Buffer.from([0, 255]));
    expect(s).toMatchObject({ metadata: null, expiresAt: null, maxAccessCount: null });
  });

  it('keeps the optional fields', () => {
    const s = parseSecretInput(
      {
        type: 'api_key',
        value: 'k',
        metadata: { a: 1 },
        expires_at: '2026-02-01T00:00:00Z',
        max_access_count: 3,
        rotation_policy: { days: 30 },
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

  it.each([
    [{ value: 'v', type: 'x' }, 'type'],
    [{}, 'value'],
    [{ value: null }, 'value'],
    [{ value: 'v', value_encoding: 'hex' }, 'value_encoding'],
    [{ value: 'a', value_encoding: 'base64' }, 'value'],
    [{ value: 'v', metadata: 'x' }, 'metadata'],
    [{ value: 'v', metadata: { big: 'x'.repeat(17000) } }, 'metadata'],
    [{ value: 'v', max_access_count: 1.5 }, 'max_access_count'],
    [{ value: 'v', max_access_count: '3' }, 'max_access_count'],
    [{ value: 'v', expires_at: '2025-01-01T00:00:00Z' }, 'expires_at'],
    [{ value: 'v', expires_at: 12 }, 'expires_at'],
    [{ value: 'v', rotation_policy: [] }, 'rotation_policy'],
    [{ value: 'v', extra: 1 }, 'extra'],
    [{ value: 'x'.repeat(256 * 1024 + 1) }, 'value'],
    [{ value: '[]', type: 'env_bundle' }, 'value'],
    [{ value: '{"1A":"x"}', type: 'env_bundle' }, 'value'],
  ])('refuses %j naming %s', (fields, field) => {
    expect(fieldOf(() => parseSecretInput(fields as Record<string, unknown>, now))).toBe(field);
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
    expect(parseRotateInput({})).toEqual({ length: 32, charset: 'alphanumeric', type: undefined });
    expect(fieldOf(() => parseRotateInput({ length: 7 }))).toBe('length');
    expect(fieldOf(() => parseRotateInput({ charset: 'x' }))).toBe('charset');
    expect(fieldOf(() => parseRotateInput({ type: 'env_bundle' }))).toBe('type');
    expect(fieldOf(() => parseRotateInput({ foo: 1 }))).toBe('foo');
    expect(generateValue({ length: 64, charset: 'hex' }).toString()).toMatch(/^[0-9a-f]{64}$/);
    expect(generateValue({ length: 50, charset: 'alphanumeric' }).toString()).toMatch(/^[A-Za-z0-9]{50}$/);
    expect(generateValue({ length: 50, charset: 'ascii' }).toString()).toMatch(/^[!-~]{50}$/);
    expect(generateValue({ length: 16, charset: 'base64' }).toString()).toMatch(/^[A-Za-z0-9+/]{16}$/);
  });
});

describe('NUL in JSON fields', () => {
  it('refuses metadata and rotation_policy holding U+0000, naming the field', () => {
    const now = new Date();
    expect(fieldOf(() => parseSecretInput({ value: 'v', metadata: { a: 'x\u0000' } }, now))).toBe('metadata');
    expect(fieldOf(() => parseSecretInput({ value: 'v', metadata: { ['k\u0000']: 1 } }, now))).toBe(
      'metadata',
    );
    expect(fieldOf(() => parseSecretInput({ value: 'v', rotation_policy: { d: ['\u0000'] } }, now))).toBe(
      'rotation_policy',
    );
  });
});
