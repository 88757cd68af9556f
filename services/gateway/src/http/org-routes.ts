import { Router } from 'express';
import { z } from 'zod/v4';
import {
  type AdminSetting,
  type AdminUser,
  type OrgMember,
  OrgServiceClient,
  type SubOrg,
} from '@custos/proto/custos/identity/v1/orgs';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { noStore } from './auth-routes.js';
import { type Guards, declareRoute } from './routes.js';
import { STEP_UP_PURPOSES, authConfirmOf } from './step-up.js';
import { MessageResponse, bodyOf, dateTime, idParam, pagingQuery } from './schemas.js';

const role = z.enum(['owner', 'admin', 'member']);

const MemberResponse = z.object({
  id: z.string(),
  email: z.string(),
  display_name: z.string(),
  role,
  auth_method: z.string(),
  created_at: dateTime,
});

const SubOrgResponse = z.object({
  id: z.string(),
  name: z.string(),
  parent_org_id: z.string(),
  created_at: dateTime,
});

const AdminUserResponse = MemberResponse.extend({
  org_id: z.string(),
  org_name: z.string(),
  platform_admin: z.boolean(),
});

const SettingResponse = z.object({
  name: z.string(),
  value: z.string(),
  updated_by: z.string().nullable(),
  updated_at: dateTime,
});

type Role = z.infer<typeof role>;

function memberBody(m: OrgMember | undefined): z.infer<typeof MemberResponse> {
  return {
    id: m?.id ?? '',
    email: m?.email ?? '',
    display_name: m?.displayName ?? '',
    role: (m?.role ?? 'member') as Role,
    auth_method: m?.authMethod ?? '',
    created_at: m?.createdAt ?? '',
  };
}

function subOrgBody(o: SubOrg | undefined): z.infer<typeof SubOrgResponse> {
  return {
    id: o?.id ?? '',
    name: o?.name ?? '',
    parent_org_id: o?.parentOrgId ?? '',
    created_at: o?.createdAt ?? '',
  };
}

function adminUserBody(u: AdminUser): z.infer<typeof AdminUserResponse> {
  return {
    id: u.id,
    email: u.email,
    display_name: u.displayName,
    role: u.role as Role,
    auth_method: u.authMethod,
    org_id: u.orgId,
    org_name: u.orgName,
    created_at: u.createdAt,
    platform_admin: u.platformAdmin,
  };
}

function settingBody(s: AdminSetting | undefined): z.infer<typeof SettingResponse> {
  return {
    name: s?.name ?? '',
    value: s?.value ?? '',
    updated_by: s?.updatedBy || null,
    updated_at: s?.updatedAt ?? '',
  };
}

const text = (description: string) => z.string().nullish().describe(description);

/**
 * The org (spec §4.7: members, invitations, sub-orgs) and the platform-admin endpoints (users,
 * settings). Every route but accepting an invitation is for humans; identity decides roles.
 */
export function orgRoutes(peers: Peers, guards: Guards): Router {
  const router = Router();
  const orgs = peers.client(OrgServiceClient, 'identity');
  const call = unaryCaller(orgs);
  const tag = 'org';
  const admin = 'admin';
  const userParams = z.object({ user_id: idParam });
  const settingParams = z.object({ name: idParam });

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/org/members',
      access: 'human',
      summary: 'The members of the caller’s org',
      tag,
      responses: {
        200: { description: 'The members', schema: z.object({ members: z.array(MemberResponse) }) },
      },
    },
    async (_req, res) => {
      const r = await call(orgs.listOrgMembers, {});
      res.json({ members: r.members.map(memberBody) });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/org/invite',
      access: 'human',
      summary: 'E-mail an invitation to join the caller’s org (owners and admins)',
      tag,
      body: bodyOf({ email: text('The address to invite'), role: text('`member` (default) or `admin`') }),
      responses: {
        200: { description: 'Invitation sent', schema: MessageResponse.extend({ email: z.string() }) },
      },
    },
    async (_req, res, { body }) => {
      const r = await call(orgs.inviteOrgMember, { email: body.email ?? '', role: body.role ?? '' });
      res.json({ message: r.message, email: r.email });
    },
  );

  // Public: the invited person has no account yet; the e-mailed token is the credential.
  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/org/invites/accept',
      access: 'public',
      summary: 'Accept an invitation: creates the invited account',
      tag,
      body: bodyOf({
        token: text('The `cse_` token from the invitation'),
        password: text('The new account’s password'),
        display_name: text('Optional display name'),
      }),
      responses: {
        201: {
          description: 'The account joined the org',
          schema: MessageResponse.extend({
            user_id: z.string(),
            email: z.string(),
            org_id: z.string(),
            role,
          }),
        },
        403: {
          description:
            '`signup_closed`: this install admits no new account (SIGNUP_MODE `closed`); the invitation stays unused',
        },
      },
    },
    async (_req, res, { body }) => {
      const r = await call(orgs.acceptOrgInvite, {
        token: body.token ?? '',
        password: body.password ?? '',
        displayName: body.display_name ?? '',
      });
      noStore(res);
      res.status(201).json({
        message: r.message,
        user_id: r.userId,
        email: r.email,
        org_id: r.orgId,
        role: r.role as Role,
      });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'patch',
      path: '/v1/org/members/:user_id',
      access: 'human',
      summary: 'Change a member’s role; the member’s tokens stop working',
      tag,
      stepUp: STEP_UP_PURPOSES.memberRoleChange,
      params: userParams,
      body: bodyOf({ role: text('`owner`, `admin` or `member`') }),
      responses: { 200: { description: 'The member', schema: MemberResponse } },
    },
    async (req, res, { params, body }) => {
      const r = await call(orgs.updateOrgMemberRole, {
        userId: params.user_id,
        role: body.role ?? '',
        credential: authConfirmOf(req),
      });
      res.json(memberBody(r.member));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'delete',
      path: '/v1/org/members/:user_id',
      access: 'human',
      summary: 'Remove a member (the account is deleted)',
      tag,
      params: userParams,
      responses: { 204: { description: 'Removed' } },
    },
    async (_req, res, { params }) => {
      await call(orgs.removeOrgMember, { userId: params.user_id });
      res.status(204).end();
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/org/sub-orgs',
      access: 'human',
      summary: 'Create an org under the caller’s org',
      tag,
      body: bodyOf({ name: z.string().describe('1 to 128 printable characters') }),
      responses: { 201: { description: 'The sub-org', schema: SubOrgResponse } },
    },
    async (_req, res, { body }) => {
      const r = await call(orgs.createSubOrg, { name: body.name });
      res.status(201).json(subOrgBody(r.subOrg));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/org/sub-orgs',
      access: 'human',
      summary: 'The sub-orgs of the caller’s org',
      tag,
      responses: {
        200: { description: 'The sub-orgs', schema: z.object({ sub_orgs: z.array(SubOrgResponse) }) },
      },
    },
    async (_req, res) => {
      const r = await call(orgs.listSubOrgs, {});
      res.json({ sub_orgs: r.subOrgs.map(subOrgBody) });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/admin/users',
      access: 'human',
      summary: 'Every user of the platform (platform admins)',
      tag: admin,
      query: z.object(pagingQuery(1000, 100)),
      responses: {
        200: {
          description: 'One page of users and the total',
          schema: z.object({ users: z.array(AdminUserResponse), total: z.number().int() }),
        },
      },
    },
    async (_req, res, { query }) => {
      const r = await call(orgs.adminListUsers, { limit: query.limit, offset: query.offset });
      res.json({ users: r.users.map(adminUserBody), total: r.total });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'delete',
      path: '/v1/admin/users/:user_id',
      access: 'human',
      summary: 'Delete a user and end every token of it (platform admins)',
      tag: admin,
      params: userParams,
      responses: { 204: { description: 'Deleted' } },
    },
    async (_req, res, { params }) => {
      await call(orgs.adminDeleteUser, { userId: params.user_id });
      res.status(204).end();
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/admin/settings',
      access: 'human',
      summary: 'The platform settings (platform admins)',
      tag: admin,
      responses: {
        200: { description: 'The settings', schema: z.object({ settings: z.array(SettingResponse) }) },
      },
    },
    async (_req, res) => {
      const r = await call(orgs.adminListSettings, {});
      res.json({ settings: r.settings.map(settingBody) });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/admin/settings/:name',
      access: 'human',
      summary: 'One platform setting (platform admins)',
      tag: admin,
      params: settingParams,
      responses: { 200: { description: 'The setting', schema: SettingResponse } },
    },
    async (_req, res, { params }) => {
      const r = await call(orgs.adminGetSetting, { name: params.name });
      res.json(settingBody(r.setting));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'put',
      path: '/v1/admin/settings/:name',
      access: 'human',
      summary: 'Create or replace a platform setting (platform admins)',
      tag: admin,
      params: settingParams,
      body: bodyOf({ value: z.string().describe('At most 4096 characters') }),
      responses: { 200: { description: 'The stored setting', schema: SettingResponse } },
    },
    async (_req, res, { params, body }) => {
      const r = await call(orgs.adminPutSetting, { name: params.name, value: body.value });
      res.json(settingBody(r.setting));
    },
  );

  return router;
}
