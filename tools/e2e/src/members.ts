import { randomBytes } from 'node:crypto';
import { TEST_PASSWORD, api, type quickUser } from './api';
import { type Mesh, sharedMail } from './mesh';
import type { SmtpCapture } from '@custos/testing';

type User = Awaited<ReturnType<typeof quickUser>>;

/**
 * Invites a new address into `inviter`'s org with `role` through the API and a mail capture (the
 * shared meshes' unless `mail` names a private mesh's), accepts the invitation and signs the new
 * member in.
 */
export async function invitedMember(
  mesh: Mesh,
  inviter: User,
  role: 'member' | 'admin',
  mail?: SmtpCapture,
): Promise<User> {
  const smtp = mail ?? sharedMail();
  try {
    const email = `m-${randomBytes(4).toString('hex')}@example.com`;
    const r = await api(mesh, 'POST', '/v1/org/invite', { token: inviter.token, body: { email, role } });
    expect(r.status).toBe(200);
    const invite = await smtp.waitForMessage((m) => m.to === email, 15_000);
    const token = decodeURIComponent(/accept-invite\?token=(\S+)/.exec(invite.text)![1]!);
    const accepted = await api(mesh, 'POST', '/v1/org/invites/accept', {
      body: { token, password: TEST_PASSWORD },
    });
    expect(accepted.status).toBe(201);
    const login = await api(mesh, 'POST', '/v1/auth/token', { body: { email, password: TEST_PASSWORD } });
    expect(login.status).toBe(200);
    return {
      email,
      token: login.body['access_token'] as string,
      userId: accepted.body['user_id'] as string,
      orgId: inviter.orgId,
    };
  } finally {
    if (!mail) await smtp.close();
  }
}
