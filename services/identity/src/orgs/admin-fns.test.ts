import { MAX_SETTING_VALUE_LENGTH, parsePage, parseSettingName, parseSettingValue } from './admin-fns';

describe('admin fns', () => {
  it('accepts setting names of ^[a-z0-9_.-]{1,64}$ only', () => {
    expect(parseSettingName('guardrail_changes_require_approval')).toBe('guardrail_changes_require_approval');
    expect(parseSettingName('a.b-c_1')).toBe('a.b-c_1');
    for (const bad of ['', 'A', 'a b', 'x'.repeat(65), 'a/b', 5]) {
      expect(() => parseSettingName(bad)).toThrow(expect.objectContaining({ field: 'name' }));
    }
  });

  it('accepts string values up to 4096 characters, including empty', () => {
    expect(parseSettingValue('x', '')).toBe('');
    expect(parseSettingValue('x', 'v'.repeat(MAX_SETTING_VALUE_LENGTH))).toHaveLength(4096);
    for (const bad of [undefined, null, 1, true, 'v'.repeat(4097)]) {
      expect(() => parseSettingValue('x', bad)).toThrow(expect.objectContaining({ field: 'value' }));
    }
  });

  it('holds the known settings to their values', () => {
    expect(parseSettingValue('guardrail_changes_require_approval', 'true')).toBe('true');
    expect(parseSettingValue('guardrail_changes_require_approval', 'false')).toBe('false');
    expect(() => parseSettingValue('guardrail_changes_require_approval', 'yes')).toThrow(
      expect.objectContaining({ field: 'value' }),
    );
    // Names inherited from Object.prototype are not settings with rules.
    expect(parseSettingValue('constructor', 'anything')).toBe('anything');
  });

  it('pages with limit 1..1000 (default 100) and offset >= 0 (default 0)', () => {
    expect(parsePage(undefined, undefined)).toEqual({ limit: 100, offset: 0 });
    expect(parsePage(1000, 5)).toEqual({ limit: 1000, offset: 5 });
    expect(() => parsePage(0, 0)).toThrow(expect.objectContaining({ field: 'limit' }));
    expect(() => parsePage(1001, 0)).toThrow(expect.objectContaining({ field: 'limit' }));
    expect(() => parsePage(10, -1)).toThrow(expect.objectContaining({ field: 'offset' }));
    expect(() => parsePage(1.5, 0)).toThrow(expect.objectContaining({ field: 'limit' }));
  });
});
