import { type Request, type RequestHandler, Router } from 'express';
import {
  type AdminSetting,
  type AdminUser,
  type OrgMember,
  OrgServiceClient,
  type SubOrg,
} from '@custos/proto/custos/identity/v1/orgs';
import { InvalidArgumentError, unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { body, str } from './auth-routes.js';
import { declareUncheckedRoute } from './routes.js';

function memberBody(m: OrgMember | undefined) {
  return {
    id: m?.id,
    email: m?.email,
    display_name: m?.displayName,
    role: m?.role,
    auth_method: m?.authMethod,
    created_at: m?.createdAt,
  };
}

function subOrgBody(o: SubOrg | undefined) {
  return { id: o?.id, name: o?.name, parent_org_id: o?.parentOrgId, created_at: o?.createdAt };
}

function adminUserBody(u: AdminUser) {
  return {
    id: u.id,
    email: u.email,
    display_name: u.displayName,
    role: u.role,
    auth_method: u.authMethod,
    org_id: u.orgId,
    org_name: u.orgName,
    created_at: u.createdAt,
    platform_admin: u.platformAdmin,
  };
}

function settingBody(s: AdminSetting | undefined) {
  return { name: s?.name, value: s?.value, updated_by: s?.updatedBy || null, updated_at: s?.updatedAt };
}

/** An optional integer query parameter; a 400 naming it when it is not a whole number. */
function intQuery(req: Request, name: string): number | undefined {
  const v = req.query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !/^-?\d+$/.test(v)) {
    throw new InvalidArgumentError(name, `${name} must be an integer`);
  }
  // Out-of-range values reach identity as the int32 bound, which refuses them with the allowed range.
  return Math.max(-(2 ** 31), Math.min(2 ** 31 - 1, Number(v)));
}

/**
 * The org (spec §4.7: members, invitations, sub-orgs) and the platform-admin endpoints (users,
 * settings). Every route but accepting an invitation is for humans; identity decides roles.
 */
export function orgRoutes(
  peers: Peers,
  guards: { authenticated: RequestHandler[]; human: RequestHandler[] },
): Router {
  const router = Router();
  const orgs = peers.client(OrgServiceClient, 'identity');
  const call = unaryCaller(orgs);

  declareUncheckedRoute(router, guards, 'get', '/v1/org/members', 'human', async (_req, res) => {
    const r = await call(orgs.listOrgMembers, {});
    res.json({ members: r.members.map(memberBody) });
  });

  declareUncheckedRoute(router, guards, 'post', '/v1/org/invite', 'human', async (req, res) => {
    const b = body(req);
    const r = await call(orgs.inviteOrgMember, { email: str(b, 'email'), role: str(b, 'role') });
    res.json({ message: r.message, email: r.email });
  });

  // Public: the invited person has no account yet; the e-mailed token is the credential.
  declareUncheckedRoute(router, guards, 'post', '/v1/org/invites/accept', 'public', async (req, res) => {
    const b = body(req);
    const r = await call(orgs.acceptOrgInvite, {
      token: str(b, 'token'),
      password: str(b, 'password'),
      displayName: str(b, 'display_name'),
    });
    res.setHeader('Cache-Control', 'no-store');
    res.status(201).json({
      message: r.message,
      user_id: r.userId,
      email: r.email,
      org_id: r.orgId,
      role: r.role,
    });
  });

  declareUncheckedRoute(router, guards, 'patch', '/v1/org/members/:user_id', 'human', async (req, res) => {
    const r = await call(orgs.updateOrgMemberRole, {
      userId: String(req.params['user_id']),
      role: str(body(req), 'role'),
    });
    res.json(memberBody(r.member));
  });

  declareUncheckedRoute(router, guards, 'delete', '/v1/org/members/:user_id', 'human', async (req, res) => {
    await call(orgs.removeOrgMember, { userId: String(req.params['user_id']) });
    res.status(204).end();
  });

  declareUncheckedRoute(router, guards, 'post', '/v1/org/sub-orgs', 'human', async (req, res) => {
    const r = await call(orgs.createSubOrg, { name: str(body(req), 'name') });
    res.status(201).json(subOrgBody(r.subOrg));
  });

  declareUncheckedRoute(router, guards, 'get', '/v1/org/sub-orgs', 'human', async (_req, res) => {
    const r = await call(orgs.listSubOrgs, {});
    res.json({ sub_orgs: r.subOrgs.map(subOrgBody) });
  });

  declareUncheckedRoute(router, guards, 'get', '/v1/admin/users', 'human', async (req, res) => {
    const r = await call(orgs.adminListUsers, {
      limit: intQuery(req, 'limit'),
      offset: intQuery(req, 'offset'),
    });
    res.json({ users: r.users.map(adminUserBody), total: r.total });
  });

  declareUncheckedRoute(router, guards, 'delete', '/v1/admin/users/:user_id', 'human', async (req, res) => {
    await call(orgs.adminDeleteUser, { userId: String(req.params['user_id']) });
    res.status(204).end();
  });

  declareUncheckedRoute(router, guards, 'get', '/v1/admin/settings', 'human', async (_req, res) => {
    const r = await call(orgs.adminListSettings, {});
    res.json({ settings: r.settings.map(settingBody) });
  });

  declareUncheckedRoute(router, guards, 'get', '/v1/admin/settings/:name', 'human', async (req, res) => {
    const r = await call(orgs.adminGetSetting, { name: String(req.params['name']) });
    res.json(settingBody(r.setting));
  });

  declareUncheckedRoute(router, guards, 'put', '/v1/admin/settings/:name', 'human', async (req, res) => {
    const b = body(req);
    const value = b['value'];
    if (value !== undefined && value !== null && typeof value !== 'string') {
      throw new InvalidArgumentError('value', 'value must be a string');
    }
    const r = await call(orgs.adminPutSetting, {
      name: String(req.params['name']),
      ...(typeof value === 'string' ? { value } : {}),
    });
    res.json(settingBody(r.setting));
  });

  return router;
}
