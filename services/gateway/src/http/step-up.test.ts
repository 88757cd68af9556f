import { GUARDRAIL_FIELDS, touchesGuardrails } from './agent-schemas';
import { STEP_UP_ACCEPTED, STEP_UP_PURPOSES, stepUpChallenge, stepUpHeaderDescription } from './step-up';

describe('stepUpChallenge', () => {
  it('is a 401 step_up_required naming the purpose and the accepted credentials', () => {
    const p = stepUpChallenge(STEP_UP_PURPOSES.emailChange);
    expect(p).toMatchObject({
      type: 'step_up_required',
      status: 401,
      purpose: 'account.email.change',
      accepted: ['reauth_token', 'password', 'totp'],
    });
    expect(p.detail).toContain('X-Auth-Confirm');
    expect(p.detail).toContain('account.email.change');
  });

  it('every purpose is dotted lower-case words, as POST /v1/auth/reauth accepts them', () => {
    for (const purpose of Object.values(STEP_UP_PURPOSES)) {
      expect(purpose).toMatch(/^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$/);
      expect(stepUpHeaderDescription(purpose)).toContain(purpose);
    }
    expect(new Set(Object.values(STEP_UP_PURPOSES)).size).toBe(Object.values(STEP_UP_PURPOSES).length);
    expect(STEP_UP_ACCEPTED).toEqual(['reauth_token', 'password', 'totp']);
  });
});

describe('touchesGuardrails (agent updates)', () => {
  it('asks the step-up for a body that sets or clears a guardrail, not for other fields', () => {
    expect(touchesGuardrails({ name: 'bot', scopes: ['secrets:read'] })).toBe(false);
    expect(touchesGuardrails({ tx_max_value_eth: null })).toBe(true);
    expect(touchesGuardrails({ raw_signing_enabled: true })).toBe(true);
    expect(touchesGuardrails({ execution_require_tee: false })).toBe(true);
    for (const f of GUARDRAIL_FIELDS) expect(touchesGuardrails({ [f]: 1 })).toBe(true);
  });
});
