import {
  approvalRequestedEmail,
  describeDuration,
  emailChangeCodeEmail,
  emailChangedNoticeEmail,
  orgInviteEmail,
  passwordResetEmail,
  shareLinkEmail,
  verificationEmail,
} from './templates';

const TOKEN = 'cse_0123456789abcdef_0123456789012345678901234567890123456789abc';
const LINK = `http://127.0.0.1:8080/verify-email?token=${TOKEN}`;

describe('describeDuration', () => {
  it('says the largest whole unit', () => {
    expect(describeDuration(600)).toBe('10 minutes');
    expect(describeDuration(60)).toBe('1 minute');
    expect(describeDuration(3600)).toBe('1 hour');
    expect(describeDuration(86400)).toBe('24 hours');
    expect(describeDuration(7 * 86400)).toBe('7 days');
    expect(describeDuration(90)).toBe('90 seconds');
  });
});

describe('templates', () => {
  it('verification: the link, the token, and how long it lasts', () => {
    const m = verificationEmail({ link: LINK, token: TOKEN });
    expect(m.template).toBe('verify_email');
    expect(m.subject).toBe('Confirm your e-mail address');
    expect(m.text).toContain(`\n${LINK}\n`);
    expect(m.text).toContain(`\n${TOKEN}\n`);
    expect(m.text).toContain('expires in 24 hours');
    expect(verificationEmail({ link: LINK, expiresInSeconds: 3600 }).text).toContain('expires in 1 hour');
    expect(verificationEmail({ link: LINK }).text).not.toContain('POST /v1/auth/verify-email');
  });

  it('password reset: the link and the token', () => {
    const m = passwordResetEmail({ link: LINK, token: TOKEN });
    expect(m.template).toBe('password_reset');
    expect(m.subject).toMatch(/reset/i);
    expect(m.text).toContain(LINK);
    expect(m.text).toContain(TOKEN);
    expect(m.text).toContain('expires in 1 hour');
  });

  it('e-mail change: the 6-digit code in the body only, expiring in 10 minutes', () => {
    const m = emailChangeCodeEmail({ code: '042917' });
    expect(m.template).toBe('email_change_code');
    expect(m.text).toMatch(/^\s+042917$/m);
    expect(m.text).toContain('expires in 10 minutes');
    expect(m.subject).not.toContain('042917');
  });

  it('e-mail changed notice: the undo link and token, 7 days, no address in the subject', () => {
    const token = 'cse_0123456789abcdef_0123456789012345678901234567890123456789abc';
    const link = `http://127.0.0.1:8080/undo-email-change?token=${token}`;
    const m = emailChangedNoticeEmail({ link, token, expiresInSeconds: 7 * 86_400 });
    expect(m.template).toBe('email_changed_notice');
    expect(m.text).toContain(link);
    expect(m.text).toMatch(new RegExp(`^${token}$`, 'm'));
    expect(m.text).toContain('expires in 7 days');
    expect(m.text).toContain('POST /v1/auth/undo-email-change');
    expect(m.subject).not.toContain('@');
  });

  it('org invite: org, inviter and link, with their text made harmless', () => {
    const m = orgInviteEmail({ orgName: 'Acme Robotics', inviter: 'Ada Lovelace', link: LINK });
    expect(m.template).toBe('org_invite');
    expect(m.subject).toBe('Join "Acme Robotics" on Custos');
    expect(m.text).toContain('Ada Lovelace invited you to join "Acme Robotics" on Custos.');
    expect(m.text).toContain(LINK);
    const hostile = orgInviteEmail({
      orgName: `Evil\r\nBcc: x@evil.test\n${'a'.repeat(300)}`,
      inviter: '',
      link: LINK,
    });
    expect(hostile.subject).not.toMatch(/[\r\n]/);
    expect(hostile.subject.length).toBeLessThan(130);
    expect(hostile.text).toContain('A member invited you');
    expect(hostile.text.split('\n')[0]).toContain('Evil Bcc: x@evil.test');
  });

  it('share link: the public share route, how often it opens, and how the passphrase travels', () => {
    const share = {
      link: 'https://custos.test/v1/share/6f1c1a52-8d8e-4c58-9a8e-2f1b7c1d9e01',
      expiresAt: new Date('2030-01-02T00:00:00.000Z'),
      maxAccessCount: 1,
      passphraseProtected: true,
    };
    const mail = shareLinkEmail(share);
    expect(mail.template).toBe('share-link');
    expect(mail.text).toContain(`\n${share.link}\n`);
    expect(mail.text).toContain('X-Share-Passphrase');
    expect(mail.text).toContain('opened once');
    const plain = shareLinkEmail({ ...share, passphraseProtected: false, maxAccessCount: 3 }).text;
    expect(plain).not.toContain('passphrase');
    expect(plain).toContain('opened 3 times');
  });

  it('every template is plain text ending with a signature', () => {
    for (const m of [
      verificationEmail({ link: LINK }),
      passwordResetEmail({ link: LINK }),
      emailChangeCodeEmail({ code: '000001' }),
      orgInviteEmail({ orgName: 'o', inviter: 'i', link: LINK }),
    ]) {
      expect(m.text).not.toMatch(/<[a-z]+[ >]/i);
      expect(m.text.endsWith('\n-- \nCustos\n')).toBe(true);
    }
  });
});

describe('approval requested', () => {
  const input = {
    link: 'https://app.custos.test/approvals/6f1c1a52-8d8e-4c58-9a8e-2f1b7c1d9e01',
    action: 'agent_transaction',
    riskTier: 3,
    kind: 'consensus' as const,
    title: 'Pay invoice 42',
    agentName: 'Payroll bot',
    targetType: 'transaction',
    targetId: 'tx-1',
    expiresAt: new Date('2030-01-02T00:00:00Z'),
  };

  it('names the agent, action, tier and what deciding needs, and links to the approval', () => {
    const m = approvalRequestedEmail(input);
    expect(m.template).toBe('approval_requested');
    expect(m.subject).toBe('Approval requested: agent_transaction (tier 3)');
    expect(m.text).toContain(`\n${input.link}\n`);
    expect(m.text).toContain('The agent "Payroll bot"');
    expect(m.text).toContain('Risk tier:  3 (deciding needs a TOTP code from your authenticator)');
    expect(m.text).toContain('Target:     transaction tx-1');
    expect(m.text).toContain('\n    "Pay invoice 42"\n');
    expect(m.text).toContain('Wed, 02 Jan 2030 00:00:00 GMT');
  });

  it('keeps the agent’s words out of the subject and to one shortened, visible line each', () => {
    const m = approvalRequestedEmail({
      ...input,
      title: `Urgent\r\nBcc: x@evil.test\n\nClick https://evil.test \u202eabc\u200b${'y'.repeat(500)}`,
      agentName: 'Bot\nSubject: hi',
      targetId: 'a\r\nb',
      expiresAt: undefined,
    });
    expect(m.subject).toBe('Approval requested: agent_transaction (tier 3)');
    const titleLine = m.text.split('\n').find((l) => l.includes('Urgent'))!;
    expect(titleLine.startsWith('    "Urgent Bcc: x@evil.test Click https://evil.test abcyyy')).toBe(true);
    expect(titleLine.endsWith('..."')).toBe(true);
    expect(titleLine.length).toBe(4 + 2 + 200);
    expect(m.text).not.toMatch(/[\u202e\u200b\r]/);
    expect(m.text).toContain('The agent "Bot Subject: hi"');
    expect(m.text).toContain('Target:     transaction a b');
    expect(m.text).not.toContain('expires on');
    expect(approvalRequestedEmail({ ...input, title: ' \n ' }).text).toContain('"(no title)"');
  });
});
