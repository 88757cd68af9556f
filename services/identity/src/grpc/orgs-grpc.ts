import type { TokenVerifier } from '@custos/auth';
import type {
  AdminSetting,
  AdminUser,
  OrgMember,
  OrgServiceServer,
  SubOrg,
} from '@custos/proto/custos/identity/v1/orgs';
import type { AsyncService } from '@custos/service-kit';
import type { AdminService } from '../orgs/admin-service.js';
import type { InviteService } from '../orgs/invite-service.js';
import type { OrgService } from '../orgs/org-service.js';
import type { AdminSettingView, AdminUserView, OrgMemberView, SubOrgView } from '../orgs/org-types.js';
import { callerResolver } from './caller.js';

function member(m: OrgMemberView): OrgMember {
  return {
    id: m.id,
    email: m.email,
    displayName: m.displayName,
    role: m.role,
    authMethod: m.authMethod,
    createdAt: m.createdAt.toISOString(),
  };
}

function subOrg(o: SubOrgView): SubOrg {
  return { id: o.id, name: o.name, parentOrgId: o.parentOrgId, createdAt: o.createdAt.toISOString() };
}

function adminUser(u: AdminUserView): AdminUser {
  return {
    id: u.id,
    email: u.email,
    displayName: u.displayName,
    role: u.role,
    authMethod: u.authMethod,
    orgId: u.orgId,
    orgName: u.orgName,
    createdAt: u.createdAt.toISOString(),
    platformAdmin: u.platformAdmin,
  };
}

function setting(s: AdminSettingView): AdminSetting {
  return { name: s.name, value: s.value, updatedBy: s.updatedBy ?? '', updatedAt: s.updatedAt.toISOString() };
}

/** gRPC adapter of OrgService: decode, call the rules, encode. */
export function orgsGrpc(deps: {
  orgs: OrgService;
  invites: InviteService;
  admin: AdminService;
  verifier: TokenVerifier;
}): AsyncService<OrgServiceServer> {
  const { orgs, invites, admin } = deps;
  const caller = callerResolver(deps.verifier);

  return {
    async listOrgMembers(_req, call) {
      return { members: (await orgs.listMembers(await caller(call))).map(member) };
    },
    async inviteOrgMember(req, call) {
      const r = await invites.invite(await caller(call), req.email, req.role);
      return { message: `Invitation sent to ${r.email}.`, email: r.email };
    },
    async acceptOrgInvite(req) {
      const r = await invites.accept({
        token: req.token,
        password: req.password,
        displayName: req.displayName,
      });
      return {
        message: 'Invitation accepted. Sign in with your e-mail address and password.',
        email: r.email,
        orgId: r.orgId,
        role: r.role,
        userId: r.userId,
      };
    },
    async updateOrgMemberRole(req, call) {
      return {
        member: member(await orgs.updateRole(await caller(call), req.userId, req.role, req.credential)),
      };
    },
    async removeOrgMember(req, call) {
      await orgs.removeMember(await caller(call), req.userId);
      return {};
    },
    async createSubOrg(req, call) {
      return { subOrg: subOrg(await orgs.createSubOrg(await caller(call), req.name)) };
    },
    async listSubOrgs(_req, call) {
      return { subOrgs: (await orgs.listSubOrgs(await caller(call))).map(subOrg) };
    },
    async adminListUsers(req, call) {
      const r = await admin.listUsers(await caller(call), req.limit, req.offset);
      return { users: r.users.map(adminUser), total: r.total };
    },
    async adminDeleteUser(req, call) {
      await admin.deleteUser(await caller(call), req.userId);
      return {};
    },
    async adminListSettings(_req, call) {
      return { settings: (await admin.listSettings(await caller(call))).map(setting) };
    },
    async adminGetSetting(req, call) {
      return { setting: setting(await admin.getSetting(await caller(call), req.name)) };
    },
    async adminPutSetting(req, call) {
      return { setting: setting(await admin.putSetting(await caller(call), req.name, req.value)) };
    },
  };
}
