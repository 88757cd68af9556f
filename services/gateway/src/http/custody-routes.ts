import { Router } from 'express';
import { z } from 'zod/v4';
import {
  type GetClientShareResponse,
  type ClientShareWrap,
  KeyCustodyServiceClient,
} from '@custos/proto/custos/signer/v1/custody';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { type Guards, declareRoute } from './routes.js';
import { bodyOf, dateTime, idParam, must } from './schemas.js';
import { SigningKeyResponse, keyBody } from './signing-key-routes.js';
import { STEP_UP_PURPOSES, authConfirmOf } from './step-up.js';

// Strict base64 (RFC 4648 §4, padded), so what is stored is exactly what a reader gets back.
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Base64 of at most `maxBytes` bytes, decoded. */
function base64(maxBytes: number) {
  return z
    .string()
    .max(Math.ceil(maxBytes / 3) * 4, `must be at most ${maxBytes} bytes`)
    .regex(BASE64, 'must be base64 (RFC 4648, padded)')
    .transform((s) => Buffer.from(s, 'base64'));
}

const WRAP_TYPES = ['passkey_prf', 'recovery_code'] as const;

/** One wrap of a client_tss key's user share, as the device sends it (signer never opens it). */
const WrapBody = z.strictObject({
  type: z
    .enum(WRAP_TYPES)
    .describe('`passkey_prf` (under a passkey PRF output) or `recovery_code` (under a recovery-code key)'),
  ciphertext: base64(4096).describe('The wrapped share, base64 (16 to 4096 bytes)'),
  algorithm: z.string().max(64).optional().describe('The wrapping algorithm, e.g. `AES-256-GCM`'),
  nonce: base64(64).optional().describe('Nonce or IV, base64 (at most 64 bytes)'),
  credential_id: z
    .string()
    .max(1024)
    .optional()
    .describe('passkey_prf (required): the passkey credential id, base64url'),
  salt: base64(128).optional().describe('PRF input or KDF salt, base64 (at most 128 bytes)'),
  kdf: z.string().max(32).optional().describe('recovery_code (required): the KDF, e.g. `argon2id`'),
  kdf_params: z
    .record(z.string().max(16), z.number().int().min(0).max(4294967295))
    .optional()
    .describe('The KDF parameters, e.g. `{"m": 65536, "t": 3, "p": 1}` (at most 8)'),
});

function wrapMessage(w: z.infer<typeof WrapBody>): ClientShareWrap {
  return {
    type: w.type,
    ciphertext: w.ciphertext,
    algorithm: w.algorithm ?? '',
    nonce: w.nonce ?? Buffer.alloc(0),
    credentialId: w.credential_id ?? '',
    salt: w.salt ?? Buffer.alloc(0),
    kdf: w.kdf ?? '',
    kdfParams: w.kdf_params ?? {},
    createdAt: '',
    updatedAt: '',
  };
}

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

const WrapResponse = z.object({
  type: z.enum(WRAP_TYPES),
  ciphertext: z.string().describe('Exactly the bytes stored, base64'),
  algorithm: z.string().nullable(),
  nonce: z.string().nullable(),
  credential_id: z.string().nullable(),
  salt: z.string().nullable(),
  kdf: z.string().nullable(),
  kdf_params: z.record(z.string(), z.number().int()),
  created_at: dateTime,
  updated_at: dateTime,
});

const ClientShareBody = z.object({
  key_id: z.string(),
  agent_id: z.string(),
  wraps: z.array(WrapResponse),
  wraps_complete: z
    .boolean()
    .describe(
      'True once a passkey_prf and a recovery_code wrap are both stored; until then the key must not receive value',
    ),
});

function shareBody(r: GetClientShareResponse): z.infer<typeof ClientShareBody> {
  return {
    key_id: r.keyId,
    agent_id: r.agentId,
    wraps_complete: r.wrapsComplete,
    wraps: r.wraps.map((w) => ({
      type: w.type as (typeof WRAP_TYPES)[number],
      ciphertext: b64(w.ciphertext),
      algorithm: w.algorithm || null,
      nonce: w.nonce.length ? b64(w.nonce) : null,
      credential_id: w.credentialId || null,
      salt: w.salt.length ? b64(w.salt) : null,
      kdf: w.kdf || null,
      kdf_params: w.kdfParams,
      created_at: w.createdAt,
      updated_at: w.updatedAt,
    })),
  };
}

const KeyChainParams = z.object({ agent_id: idParam, chain: idParam });
const KeyIdParams = z.object({ key_id: idParam });

const tag = 'signing-keys';

/**
 * Key custody (spec §2.8, §4.4): export and import of agents' signing keys (owners and admins of
 * the agent's org, behind step-up; signer has identity check the credential again) and the wraps
 * of client_tss keys' user shares (owners and admins; ciphertext signer never opens).
 */
export function custodyRoutes(peers: Peers, guards: Guards): Router {
  const router = Router();
  const custody = peers.client(KeyCustodyServiceClient, 'signer');
  const call = unaryCaller(custody);

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/agents/:agent_id/signing-keys/:chain/export',
      access: 'human',
      summary:
        "Export the private half of the agent's active key (owners and admins; audited `signing_key.export`; not for client_tss keys: 409)",
      tag,
      stepUp: STEP_UP_PURPOSES.agentSigningKeyExport,
      params: KeyChainParams,
      responses: {
        200: {
          description: 'The key with its private half (`Cache-Control: no-store`)',
          schema: z.object({
            id: z.string(),
            agent_id: z.string(),
            chain: z.string(),
            curve: z.string(),
            public_key: z.string(),
            address: z.string(),
            private_key: z.string().describe('0x-prefixed hex'),
            key_version: z.number().int(),
          }),
        },
      },
    },
    async (req, res, { params }) => {
      const r = await call(custody.exportSigningKey, {
        agentId: params.agent_id,
        chain: params.chain,
        credential: authConfirmOf(req),
      });
      const k = must(r.key, 'key');
      res.setHeader('Cache-Control', 'no-store');
      res.json({
        id: k.id,
        agent_id: k.agentId,
        chain: k.chain,
        curve: k.curve,
        public_key: k.publicKey,
        address: k.address,
        private_key: `0x${Buffer.from(r.privateKey).toString('hex')}`,
        key_version: k.keyVersion,
      });
      r.privateKey.fill(0);
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/agents/:agent_id/signing-keys/:chain/import',
      access: 'human',
      summary:
        "Import a private key as the agent's next key version; an active key is replaced as by a rotation (owners and admins; audited `signing_key.import`)",
      tag,
      stepUp: STEP_UP_PURPOSES.agentSigningKeyImport,
      params: KeyChainParams,
      body: bodyOf({
        private_key: z
          .string()
          .min(1, 'is required')
          .max(200)
          .describe('EVM: 0x-prefixed hex of 32 bytes; never answered back'),
      }),
      responses: {
        201: {
          description: 'The imported key, active, with the version it replaced (or null)',
          schema: SigningKeyResponse.extend({ previous: SigningKeyResponse.nullable() }),
        },
      },
    },
    async (req, res, { params, body }) => {
      const r = await call(custody.importSigningKey, {
        agentId: params.agent_id,
        chain: params.chain,
        credential: authConfirmOf(req),
        privateKey: body.private_key,
      });
      res
        .status(201)
        .json({ ...keyBody(must(r.key, 'key')), previous: r.previous ? keyBody(r.previous) : null });
    },
  );

  const shareResponses = {
    200: { description: 'The stored wraps, as they were sent', schema: ClientShareBody },
  };

  declareRoute(
    router,
    guards,
    {
      method: 'put',
      path: '/v1/keys/:key_id/client-share',
      access: 'human',
      summary:
        "Store wraps of a client_tss key's user share, for types not stored yet (owners and admins; a stored type: 409, use rewrap)",
      tag,
      params: KeyIdParams,
      body: bodyOf({ wraps: z.array(WrapBody).min(1, 'at least one wrap is required').max(2) }),
      responses: shareResponses,
    },
    async (_req, res, { params, body }) => {
      const r = await call(custody.putClientShare, {
        keyId: params.key_id,
        wraps: body.wraps.map(wrapMessage),
      });
      res.setHeader('Cache-Control', 'no-store');
      res.json(shareBody(r));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/keys/:key_id/client-share',
      access: 'human',
      noHead: true,
      summary: "The wraps of a client_tss key's user share, unopened (owners and admins)",
      tag,
      params: KeyIdParams,
      responses: shareResponses,
    },
    async (_req, res, { params }) => {
      const r = await call(custody.getClientShare, { keyId: params.key_id });
      res.setHeader('Cache-Control', 'no-store');
      res.json(shareBody(r));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/keys/:key_id/client-share/rewrap',
      access: 'human',
      summary: 'Replace the stored wrap of one type (owners and admins; none of that type: 404)',
      tag,
      params: KeyIdParams,
      body: bodyOf({ wrap: WrapBody }),
      responses: shareResponses,
    },
    async (_req, res, { params, body }) => {
      const r = await call(custody.rewrapClientShare, { keyId: params.key_id, wrap: wrapMessage(body.wrap) });
      res.setHeader('Cache-Control', 'no-store');
      res.json(shareBody(r));
    },
  );

  return router;
}
