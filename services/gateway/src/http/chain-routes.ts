import { Router } from 'express';
import { z } from 'zod/v4';
import type { Chain } from '@custos/proto/custos/signer/v1/messages';
import { SignerServiceClient } from '@custos/proto/custos/signer/v1/service';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { type Guards, declareRoute } from './routes.js';
import { bodyOf, dateTime, idParam, must } from './schemas.js';

/**
 * A chain as HTTP shows it: the reference ChainResponse, with `family`, `native_decimals` and
 * `rpc_configured`; `rpc_url`/`ws_url` reach platform admins only (signer decides).
 */
export const ChainResponse = z.object({
  id: z.string(),
  name: z.string(),
  display_name: z.string(),
  chain_id: z.number().int(),
  family: z.enum(['evm', 'bitcoin', 'solana', 'xrp', 'cardano', 'tron']),
  rpc_url: z
    .string()
    .nullable()
    .describe(
      'Platform admins only (a provider URL often holds its API key): null for everyone else, and when none is configured',
    ),
  ws_url: z.string().nullable().describe('Platform admins only, as rpc_url'),
  rpc_configured: z.boolean().describe('Whether the chain has a JSON-RPC endpoint (told to every caller)'),
  explorer_url: z.string(),
  native_currency: z.string(),
  native_decimals: z.number().int(),
  is_testnet: z.boolean(),
  is_enabled: z.boolean(),
  created_at: dateTime,
  updated_at: dateTime,
});

const ChainList = z.object({ chains: z.array(ChainResponse) });

/** A chain of the wire as HTTP shows it. */
export function chainBody(c: Chain): z.infer<typeof ChainResponse> {
  return {
    id: c.id,
    name: c.name,
    display_name: c.displayName,
    chain_id: Number(c.chainId),
    family: c.family as z.infer<typeof ChainResponse>['family'],
    rpc_url: c.rpcUrl || null,
    ws_url: c.wsUrl || null,
    rpc_configured: c.rpcConfigured,
    explorer_url: c.explorerUrl,
    native_currency: c.nativeCurrency,
    native_decimals: c.nativeDecimals,
    is_testnet: c.isTestnet,
    is_enabled: c.isEnabled,
    created_at: c.createdAt,
    updated_at: c.updatedAt,
  };
}

const chainIdField = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

// Signer judges names, URLs and families (400 naming the field); the shapes are checked here.
const CreateChainBody = bodyOf({
  name: z.string().min(1, 'is required').max(63).describe('Unique: lower-case letters, digits, hyphens'),
  display_name: z.string().min(1, 'is required').max(100),
  chain_id: chainIdField.describe('EIP-155 chain id for EVM chains'),
  family: z.enum(['evm', 'bitcoin', 'solana', 'xrp', 'cardano', 'tron']).optional().describe('Default `evm`'),
  rpc_url: z.string().max(2048).optional(),
  ws_url: z.string().max(2048).optional(),
  explorer_url: z.string().max(2048).optional(),
  native_currency: z.string().max(12).optional().describe("Default: the family's (ETH for EVM)"),
  native_decimals: z.number().int().min(0).max(36).optional(),
  is_testnet: z.boolean().optional().describe('Default false'),
  is_enabled: z.boolean().optional().describe('Default true'),
});

const UpdateChainBody = bodyOf({
  display_name: z.string().min(1).max(100).optional(),
  rpc_url: z.string().max(2048).optional().describe('Empty clears it'),
  ws_url: z.string().max(2048).optional(),
  explorer_url: z.string().max(2048).optional(),
  native_currency: z.string().min(1).max(12).optional(),
  is_testnet: z.boolean().optional(),
  is_enabled: z
    .boolean()
    .optional()
    .describe('false disables the chain: hidden from users, no new keys on it'),
});

const tag = 'chains';

/** The chains registry (spec §2.5): signer owns it; platform admins edit it. */
export function chainRoutes(peers: Peers, guards: Guards): Router {
  const router = Router();
  const signer = peers.client(SignerServiceClient, 'signer');
  const call = unaryCaller(signer);

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/chains',
      access: 'authenticated',
      summary: 'The enabled chains (any signed-in user or agent)',
      tag,
      responses: { 200: { description: 'By name', schema: ChainList } },
    },
    async (_req, res) => {
      const r = await call(signer.listChains, { includeDisabled: false });
      res.json({ chains: r.chains.map(chainBody) });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/chains/:identifier',
      access: 'authenticated',
      summary: 'One enabled chain by UUID, numeric chain_id or name',
      tag,
      params: z.object({ identifier: idParam.describe('e.g. `ethereum`, `1`, or the entry UUID') }),
      responses: { 200: { description: 'The chain', schema: ChainResponse } },
    },
    async (_req, res, { params }) => {
      const r = await call(signer.getChain, { identifier: params.identifier });
      res.json(chainBody(must(r.chain, 'chain')));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/admin/chains',
      access: 'human',
      summary: 'Every chain, disabled ones included (platform admins)',
      tag,
      responses: { 200: { description: 'By name', schema: ChainList } },
    },
    async (_req, res) => {
      const r = await call(signer.listChains, { includeDisabled: true });
      res.json({ chains: r.chains.map(chainBody) });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/admin/chains',
      access: 'human',
      summary: 'Add a chain (platform admins); audited `chain.created`',
      tag,
      body: CreateChainBody,
      responses: { 201: { description: 'The chain', schema: ChainResponse } },
    },
    async (_req, res, { body }) => {
      const r = await call(signer.createChain, {
        name: body.name,
        displayName: body.display_name,
        chainId: String(body.chain_id),
        family: body.family ?? '',
        rpcUrl: body.rpc_url ?? '',
        wsUrl: body.ws_url ?? '',
        explorerUrl: body.explorer_url ?? '',
        nativeCurrency: body.native_currency ?? '',
        ...(body.native_decimals !== undefined ? { nativeDecimals: body.native_decimals } : {}),
        isTestnet: body.is_testnet ?? false,
        ...(body.is_enabled !== undefined ? { isEnabled: body.is_enabled } : {}),
      });
      res.status(201).json(chainBody(must(r.chain, 'chain')));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'patch',
      path: '/v1/admin/chains/:identifier',
      access: 'human',
      summary: 'Change, disable or enable a chain (platform admins); audited `chain.updated`',
      tag,
      params: z.object({ identifier: idParam }),
      body: UpdateChainBody,
      responses: { 200: { description: 'The chain', schema: ChainResponse } },
    },
    async (_req, res, { params, body }) => {
      const r = await call(signer.updateChain, {
        identifier: params.identifier,
        ...(body.display_name !== undefined ? { displayName: body.display_name } : {}),
        ...(body.rpc_url !== undefined ? { rpcUrl: body.rpc_url } : {}),
        ...(body.ws_url !== undefined ? { wsUrl: body.ws_url } : {}),
        ...(body.explorer_url !== undefined ? { explorerUrl: body.explorer_url } : {}),
        ...(body.native_currency !== undefined ? { nativeCurrency: body.native_currency } : {}),
        ...(body.is_testnet !== undefined ? { isTestnet: body.is_testnet } : {}),
        ...(body.is_enabled !== undefined ? { isEnabled: body.is_enabled } : {}),
      });
      res.json(chainBody(must(r.chain, 'chain')));
    },
  );

  return router;
}
