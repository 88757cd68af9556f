import { z } from 'zod/v4';
import { InvalidArgumentError } from '@custos/service-kit';
import { checkJsonBody, fieldName, parseInput } from './input';

function refusal(fn: () => unknown): { field?: string; detail: string } {
  try {
    fn();
  } catch (err) {
    if (err instanceof InvalidArgumentError) return { field: err.field, detail: err.detail };
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('parseInput', () => {
  const schema = z.strictObject({ name: z.string(), tags: z.array(z.string()).optional() });

  it('names a missing field as required', () => {
    expect(refusal(() => parseInput(schema, {}, 'body'))).toEqual({
      field: 'name',
      detail: 'name is required',
    });
  });

  it('names a field of the wrong type without calling it missing', () => {
    const r = refusal(() => parseInput(schema, { name: 42 }, 'body'));
    expect(r.field).toBe('name');
    expect(r.detail).not.toContain('required');
    expect(r.detail).toContain('expected string');
  });

  it('names an unknown member before the missing field it causes', () => {
    expect(refusal(() => parseInput(schema, { nme: 'x' }, 'body'))).toEqual({
      field: 'nme',
      detail: 'nme is not a field of the request body',
    });
  });

  it('names items of arrays by index', () => {
    expect(refusal(() => parseInput(schema, { name: 'a', tags: ['x', 3] }, 'body')).field).toBe('tags[1]');
  });
});

describe('checkJsonBody', () => {
  it('refuses depth past 32 at the field that nests', () => {
    let v: unknown = 1;
    for (let i = 0; i < 40; i++) v = [v];
    expect(refusal(() => checkJsonBody({ a: v })).field).toMatch(/^a(\[0\])+$/);
  });

  it('allows NUL only in the named top-level fields', () => {
    expect(() => checkJsonBody({ value: 'a\u0000b' }, new Set(['value']))).not.toThrow();
    expect(refusal(() => checkJsonBody({ value: { x: 'a\u0000b' } }, new Set(['value']))).field).toBe(
      'value.x',
    );
    expect(refusal(() => checkJsonBody({ name: 'a\u0000b' }, new Set(['value']))).field).toBe('name');
  });

  it('refuses unpaired surrogates in values and keys, and accepts paired ones', () => {
    expect(() => checkJsonBody({ emoji: '\ud83d\ude00' })).not.toThrow();
    expect(refusal(() => checkJsonBody({ a: '\ud83d' })).field).toBe('a');
    expect(refusal(() => checkJsonBody({ a: { ['\ude00']: 1 } })).field).toBe('a.\ude00');
  });

  it('refuses __proto__ as a member', () => {
    expect(refusal(() => checkJsonBody(JSON.parse('{"__proto__":{"x":1}}'))).field).toBe('__proto__');
  });
});

describe('fieldName', () => {
  it('joins keys with dots and indexes in brackets', () => {
    expect(fieldName(['a', 0, 'b'])).toBe('a[0].b');
    expect(fieldName([])).toBe('body');
  });
});
