import { EMAIL_CODE_TTL_SECONDS } from '../credentials/email-code-fns.js';

/** A rendered e-mail. `template` names it in logs, which never carry the subject or body. */
export interface MailContent {
  template: string;
  subject: string;
  text: string;
}

/** Default lifetime shown in a verification e-mail, in seconds (matches EMAIL_VERIFICATION_TTL_SECONDS). */
const DEFAULT_VERIFICATION_TTL = 86400;
/** Default lifetime shown in a password-reset e-mail, in seconds. */
const DEFAULT_RESET_TTL = 3600;
/** Default lifetime shown in an invitation e-mail, in seconds. */
const DEFAULT_INVITE_TTL = 7 * 86400;

const SIGNATURE = '\n-- \nCustos\n';

/** "10 minutes", "1 hour", "24 hours", "7 days": the largest whole unit of a duration. */
export function describeDuration(seconds: number): string {
  const unit = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  // A day is said as 24 hours; from two days on, days read better.
  if (seconds > 86400 && seconds % 86400 === 0) return unit(seconds / 86400, 'day');
  if (seconds >= 3600 && seconds % 3600 === 0) return unit(seconds / 3600, 'hour');
  if (seconds >= 60 && seconds % 60 === 0) return unit(seconds / 60, 'minute');
  return unit(Math.max(0, Math.round(seconds)), 'second');
}

/**
 * Text another user chose (an org name, a display name): one line, no control characters, at most
 * 100 characters, so it cannot forge headers or lines of our message.
 */
function userText(value: string, fallback: string, max = 100): string {
  const clean = String(value ?? '')
    // eslint-disable-next-line no-control-regex
    .replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ')
    // Bidirectional overrides and zero-width characters: they make shown text read differently.
    .replace(/[\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]+/g, '')
    .replace(/\s+/g, ' ')
    .trim();
  if (!clean) return fallback;
  return clean.length > max ? `${clean.slice(0, max - 3)}...` : clean;
}

/** The e-mail that confirms a new account's address: a link, and the bare token for API clients. */
export function verificationEmail(input: {
  link: string;
  token?: string;
  expiresInSeconds?: number;
}): MailContent {
  const ttl = describeDuration(input.expiresInSeconds ?? DEFAULT_VERIFICATION_TTL);
  const lines = [
    'Welcome to Custos.',
    '',
    'Confirm your e-mail address by opening this link:',
    '',
    input.link,
    '',
  ];
  if (input.token) {
    lines.push('Or send this token to POST /v1/auth/verify-email:', '', input.token, '');
  }
  lines.push(
    `The link expires in ${ttl} and works once.`,
    'If you did not create a Custos account, ignore this e-mail; no account is activated without it.',
  );
  return {
    template: 'verify_email',
    subject: 'Confirm your e-mail address',
    text: lines.join('\n') + SIGNATURE,
  };
}

/** The e-mail with a password-reset link; the bare token is for API clients. */
export function passwordResetEmail(input: {
  link: string;
  token?: string;
  expiresInSeconds?: number;
}): MailContent {
  const ttl = describeDuration(input.expiresInSeconds ?? DEFAULT_RESET_TTL);
  const lines = [
    'Someone asked to reset the password of your Custos account.',
    '',
    'To choose a new password, open this link:',
    '',
    input.link,
    '',
  ];
  if (input.token) {
    lines.push(
      'Or send this token with the new password to POST /v1/auth/reset-password:',
      '',
      input.token,
      '',
    );
  }
  lines.push(
    `The link expires in ${ttl} and works once.`,
    'If you did not ask for this, ignore this e-mail: your password stays as it is.',
  );
  return {
    template: 'password_reset',
    subject: 'Reset your Custos password',
    text: lines.join('\n') + SIGNATURE,
  };
}

/** The code that confirms a change of e-mail address, sent to the new address. */
export function emailChangeCodeEmail(input: { code: string; expiresInSeconds?: number }): MailContent {
  const ttl = describeDuration(input.expiresInSeconds ?? EMAIL_CODE_TTL_SECONDS);
  const text = [
    'To make this the e-mail address of your Custos account, enter this code:',
    '',
    `    ${input.code}`,
    '',
    `The code expires in ${ttl}.`,
    'If you did not ask to change your e-mail address, ignore this e-mail; nothing changes without the code.',
  ].join('\n');
  return {
    template: 'email_change_code',
    // Not in the subject: subjects show on lock screens and in notification previews.
    subject: 'Your Custos e-mail change code',
    text: text + SIGNATURE,
  };
}

/**
 * The notice to the address an e-mail change replaced, with the single-use link that undoes it
 * (the account may be in someone else's hands: undoing also ends every session and API key).
 */
export function emailChangedNoticeEmail(input: {
  link: string;
  token: string;
  expiresInSeconds: number;
}): MailContent {
  const ttl = describeDuration(input.expiresInSeconds);
  const text = [
    "The e-mail address of your Custos account was changed: this address is no longer the account's.",
    '',
    'If you did not make this change, undo it with this link:',
    '',
    input.link,
    '',
    'Or send this token to POST /v1/auth/undo-email-change:',
    '',
    input.token,
    '',
    `The link works once and expires in ${ttl}. Undoing restores this address, signs out every`,
    'session and revokes every personal API key of the account; then reset your password.',
    'If you made the change yourself, ignore this e-mail.',
  ].join('\n');
  return {
    template: 'email_changed_notice',
    // The new address is not named: it is personal data of whoever holds the account now.
    subject: 'The e-mail address of your Custos account was changed',
    text: text + SIGNATURE,
  };
}

/** An invitation to join an org; the org and inviter names are shown as plain, shortened text. */
export function orgInviteEmail(input: {
  orgName: string;
  inviter: string;
  link: string;
  expiresInSeconds?: number;
}): MailContent {
  const org = userText(input.orgName, 'an organization');
  const inviter = userText(input.inviter, 'A member');
  const ttl = describeDuration(input.expiresInSeconds ?? DEFAULT_INVITE_TTL);
  const text = [
    `${inviter} invited you to join "${org}" on Custos.`,
    '',
    'To accept, open this link:',
    '',
    input.link,
    '',
    `The invitation expires in ${ttl}.`,
    'If you did not expect it, ignore this e-mail.',
  ].join('\n');
  return { template: 'org_invite', subject: `Join "${org}" on Custos`, text: text + SIGNATURE };
}

/** The e-mail that hands a share link to an external recipient (never the value or passphrase). */
export function shareLinkEmail(input: {
  link: string;
  expiresAt: Date;
  maxAccessCount: number;
  passphraseProtected: boolean;
}): MailContent {
  const opens = input.maxAccessCount === 1 ? 'once' : `${input.maxAccessCount} times`;
  const lines = [
    'Someone shared a secret with you through Custos.',
    '',
    'Open it with this link:',
    '',
    input.link,
    '',
    `The link works until ${input.expiresAt.toUTCString()} and can be opened ${opens}.`,
  ];
  if (input.passphraseProtected) {
    lines.push(
      '',
      'It is protected by a passphrase, which the sender will give you separately. Send it in the',
      'X-Share-Passphrase header. After 5 wrong passphrases the link stops working.',
    );
  }
  lines.push('', 'If you did not expect this, you can ignore this e-mail.');
  return {
    template: 'share-link',
    subject: 'A secret was shared with you',
    text: lines.join('\n') + SIGNATURE,
  };
}

/** What each risk tier asks of the human who decides (the approvals design). */
const TIER_PROOF: Record<number, string> = {
  1: 'a signed-in member of the organization',
  2: 'a step-up: your password, a TOTP code or a re-auth token',
  3: 'a TOTP code from your authenticator',
};

/**
 * The notice of a new approval request to a human of the org. The title, agent name and target
 * are the agent's (or its creator's) words: each is shown as one plain, shortened line, quoted
 * where it is free text, and never in the subject (which carries only the validated action and
 * tier), so an agent cannot forge headers, links or lines of our message.
 */
export function approvalRequestedEmail(input: {
  link: string;
  action: string;
  riskTier: number;
  kind: 'single' | 'consensus';
  title: string;
  agentName: string;
  targetType: string;
  targetId: string;
  expiresAt: Date | undefined;
}): MailContent {
  const title = userText(input.title, '(no title)', 200);
  const agent = userText(input.agentName, 'an agent');
  const target = [userText(input.targetType, '', 64), userText(input.targetId, '', 200)]
    .filter(Boolean)
    .join(' ');
  const lines = [
    `The agent "${agent}" of your Custos organization asks for a human decision.`,
    '',
    `Action:     ${input.action}`,
    `Risk tier:  ${input.riskTier} (deciding needs ${TIER_PROOF[input.riskTier] ?? 'a step-up'})`,
    `Decision:   ${input.kind === 'consensus' ? 'several approvers (consensus)' : 'one approver'}`,
  ];
  if (target) lines.push(`Target:     ${target}`);
  lines.push(
    '',
    "In the agent's words (not checked by Custos):",
    `    "${title}"`,
    '',
    'Review what it asks and decide here:',
    '',
    input.link,
    '',
  );
  if (input.expiresAt && !Number.isNaN(input.expiresAt.getTime()))
    lines.push(`The request expires on ${input.expiresAt.toUTCString()}; undecided, it is refused.`);
  lines.push('Approve only what you expected: the page shows what Custos computed from the request itself.');
  return {
    template: 'approval_requested',
    subject: `Approval requested: ${input.action} (tier ${input.riskTier})`,
    text: lines.join('\n') + SIGNATURE,
  };
}
