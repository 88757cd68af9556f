import { Router } from 'express';
import { z } from 'zod/v4';
import type { SigningKey } from '@custos/proto/custos/signer/v1/messages';
import { SignerServiceClient } from '@custos/proto/custos/signer/v1/service';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { AgentParams } from './agent-schemas.js';
import { type Guards, declareRoute } from './routes.js';
import { bodyOf, dateTime, idParam, must } from './schemas.js';

/** A key version as HTTP shows it: the reference SigningKeyResponse with `custody` (spec §2.8). */
export const SigningKeyResponse = z.object({
  id: z.string(),
  agent_id: z.string(),
  chain: z.string().describe('`ethereum` for every EVM chain (one key serves them all)'),
  curve: z.string(),
  public_key: z
    .string()
    .nullable()
    .describe(
      'Uncompressed, 0x-prefixed hex; null for a client_tss key (the joint key needs the threshold protocol)',
    ),
  address: z
    .string()
    .nullable()
    .describe('EIP-55 checksummed for EVM; null for a client_tss key, which cannot receive value yet'),
  key_version: z.number().int(),
  is_active: z.boolean(),
  custody: z.enum(['server', 'client_tss', 'passkey_owner']),
  created_at: dateTime,
  rotated_at: dateTime.nullable(),
});

export function keyBody(k: SigningKey): z.infer<typeof SigningKeyResponse> {
  return {
    id: k.id,
    agent_id: k.agentId,
    chain: k.chain,
    curve: k.curve,
    public_key: k.publicKey || null,
    address: k.address || null,
    key_version: k.keyVersion,
    is_active: k.isActive,
    custody: k.custody as z.infer<typeof SigningKeyResponse>['custody'],
    created_at: k.createdAt,
    rotated_at: k.rotatedAt || null,
  };
}

const CreateKeyBody = bodyOf({
  chain: z
    .union([z.string().min(1, 'is required').max(100), z.number().int().min(0)])
    .transform(String)
    .describe('A chain of the registry: name (`ethereum`, `base`, `anvil` …), numeric chain_id or UUID'),
  custody: z
    .enum(['server', 'client_tss', 'passkey_owner'])
    .optional()
    .describe(
      '`server` (default), or `client_tss`: a two-party key of which the server makes and keeps one share (address null until the threshold protocol exists). `passkey_owner` is refused (400)',
    ),
});

const tag = 'signing-keys';

/**
 * Agents' signing keys (spec §4.4, §2.8). Signer decides who may (owners and admins make and
 * rotate; humans of the org and the agent itself list) and asks identity itself whether the agent
 * is in the caller's org (404 otherwise, as for GET /v1/agents/{id}).
 */
export function signingKeyRoutes(
  peers: Peers,
  guards: Guards,
  opts: {
    /**
     * The trusted ingress header holding the client's country (CUSTODY_REGION_HEADER, e.g.
     * `cf-ipcountry`): its value goes to signer for custody geofencing in header mode (issue 20).
     */
    regionHeader?: string | undefined;
  } = {},
): Router {
  const router = Router();
  const signer = peers.client(SignerServiceClient, 'signer');
  const call = unaryCaller(signer);

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/agents/:agent_id/signing-keys',
      access: 'human',
      summary:
        "Provision the agent's key for a chain family, generated inside signer (owners and admins of its org)",
      tag,
      params: AgentParams,
      body: CreateKeyBody,
      responses: {
        201: {
          description: 'The public half; the private half never leaves the service',
          schema: SigningKeyResponse,
        },
      },
    },
    async (req, res, { params, body }) => {
      const region = opts.regionHeader ? req.header(opts.regionHeader) : undefined;
      const r = await call(signer.createSigningKey, {
        agentId: params.agent_id,
        chain: body.chain,
        custody: body.custody ?? '',
        clientRegion: (region ?? '').trim().slice(0, 8),
      });
      res.status(201).json(keyBody(must(r.key, 'key')));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/agents/:agent_id/signing-keys',
      access: 'authenticated',
      summary: "The agent's keys, every version, with custody (humans of its org; the agent itself)",
      tag,
      params: AgentParams,
      responses: {
        200: { description: 'Active first', schema: z.object({ keys: z.array(SigningKeyResponse) }) },
      },
    },
    async (_req, res, { params }) => {
      const r = await call(signer.listSigningKeys, { agentId: params.agent_id });
      res.json({ keys: r.keys.map(keyBody) });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/agents/:agent_id/signing-keys/:chain/rotate',
      access: 'human',
      summary:
        'Replace the active key with a new version; the old one stays listed (emits `signing_key.rotated`; owners and admins)',
      tag,
      params: z.object({ agent_id: idParam, chain: idParam }),
      responses: {
        200: {
          description: 'The new key, with the version it replaced',
          schema: SigningKeyResponse.extend({ previous: SigningKeyResponse }),
        },
      },
    },
    async (_req, res, { params }) => {
      const r = await call(signer.rotateSigningKey, { agentId: params.agent_id, chain: params.chain });
      res.json({ ...keyBody(must(r.key, 'key')), previous: keyBody(must(r.previous, 'previous')) });
    },
  );

  return router;
}
