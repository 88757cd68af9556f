import type { Request } from 'express';
import { Router } from 'express';
import { z } from 'zod/v4';
import {
  type AuditEvent,
  BreakReason,
  type Checkpoint,
  type CheckpointKeyInfo,
  type VerifyResponse,
} from '@custos/proto/custos/audit/v1/messages';
import { AuditServiceClient } from '@custos/proto/custos/audit/v1/service';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { type Guards, declareRoute } from './routes.js';
import { dateTime, intQuery, isoDateTime, jsonObject, queryString, uuid } from './schemas.js';

const VERIFY_PATH = '/v1/audit/verify';
// Records per ExportEvents call (well under gRPC's 4 MiB message limit).
const EXPORT_PAGE = 1000;

/** `GET /v1/audit/events` items: the reference's AuditEvent, plus the chain fields. */
export const AuditEventResponse = z.object({
  id: z.string(),
  org_id: z.string(),
  sequence: z.number().int().describe("Position in the org's chain, from 1, without gaps"),
  action: z.string().describe('Dotted action name, e.g. `secret.read`'),
  actor_type: z.string().describe('`user`, `agent`, `system` or `anonymous`'),
  actor_id: z.string().nullable(),
  resource_type: z.string(),
  resource_id: z.string().nullable(),
  details: jsonObject.describe('Facts about the action; never a secret value'),
  ip_address: z.string().nullable(),
  request_id: z.string().nullable(),
  created_at: dateTime,
  prev_hash: z.string().describe("The previous record's integrity_hash; 64 zeros for the first"),
  integrity_hash: z.string().describe('Lowercase hex HMAC-SHA256, see /v1/audit/verify'),
  key_version: z
    .number()
    .int()
    .describe('The version of the HMAC key that chained the record (AUDIT_HMAC_KEY is 1)'),
});

/** A signed checkpoint of the org's chain head (docs/security.md: audit checkpoints). */
export const AuditCheckpointResponse = z.object({
  id: z.string(),
  org_id: z.string(),
  sequence: z.number().int().describe("The head's position: the org's last record then"),
  head_hash: z.string().describe('The integrity_hash of the record at `sequence`'),
  created_at: dateTime,
  key_id: z.string().describe('First 16 hex digits of SHA-256 of the raw Ed25519 public key'),
  signature: z
    .string()
    .describe(
      'Base64 Ed25519 signature over `custos-audit-checkpoint-v1` + newline + the canonical JSON of ' +
        '{created_at, head_hash, key_id, org_id, seq}',
    ),
});

const CheckpointKey = z.object({
  key_id: z.string(),
  public_key: z.string().describe('The raw 32-byte Ed25519 public key, base64'),
  public_key_pem: z.string().describe('The same key as SPKI PEM'),
});

const AuditCheckpointsResponse = z.object({
  checkpoints: z.array(AuditCheckpointResponse).describe('Newest first'),
  count: z.number().int(),
  key: CheckpointKey,
});

const AuditExportResponse = z.object({
  format: z.literal('custos-audit-export-v1'),
  org_id: z.string(),
  exported_at: dateTime,
  head: z.object({ sequence: z.number().int(), hash: z.string() }),
  events: z.array(AuditEventResponse).describe('Every record up to the head, oldest first'),
  checkpoints: z.array(AuditCheckpointResponse).describe('Every checkpoint of the org, newest first'),
  key: CheckpointKey,
});

const AuditEventsResponse = z.object({
  events: z.array(AuditEventResponse).describe('Newest first'),
  count: z.number().int().describe('How many records match the filter in all'),
});

const REASONS = [
  'hmac_mismatch',
  'sequence_gap',
  'link_mismatch',
  'head_mismatch',
  'checkpoint_mismatch',
] as const;

/** `GET /v1/audit/verify`: the reference's AuditVerifyResponse, plus where and why it broke. */
export const AuditVerifyResponse = z.object({
  chain_valid: z.boolean(),
  events_checked: z.number().int().describe('Records examined; verification stops at the first broken one'),
  events_verified: z.number().int().describe('Records whose HMAC and link check out'),
  broken_at_event_id: z.string().nullable().describe('The first broken record; null when the chain is valid'),
  broken_at_sequence: z.number().int().nullable(),
  reason: z
    .enum(REASONS)
    .nullable()
    .describe(
      '`hmac_mismatch` (edited), `sequence_gap` (a record before it deleted), `link_mismatch` ' +
        '(reordered), `head_mismatch` (records removed from the end), `checkpoint_mismatch` (the ' +
        'chain contradicts the checkpoint asked for: records removed and the head rewound); null when valid',
    ),
  checkpoint: z
    .object({
      id: z.string(),
      sequence: z.number().int(),
      signature_valid: z.boolean(),
      record_matches: z
        .boolean()
        .describe("The record at the checkpoint's position still carries the signed head hash"),
      head_at_or_after: z.boolean(),
    })
    .nullable()
    .describe('The check against `?checkpoint=`; null when none was asked for'),
  scheme: z.object({
    algorithm: z.string(),
    chain_structure: z.string().describe('What the HMAC covers and how records link'),
    hash_field: z.string(),
    link_field: z.string(),
    documentation: z.url().describe('This operation in the OpenAPI document of this server'),
  }),
});

const REASON_NAMES: Partial<Record<BreakReason, (typeof REASONS)[number]>> = {
  [BreakReason.BREAK_REASON_HMAC_MISMATCH]: 'hmac_mismatch',
  [BreakReason.BREAK_REASON_SEQUENCE_GAP]: 'sequence_gap',
  [BreakReason.BREAK_REASON_LINK_MISMATCH]: 'link_mismatch',
  [BreakReason.BREAK_REASON_HEAD_MISMATCH]: 'head_mismatch',
  [BreakReason.BREAK_REASON_CHECKPOINT_MISMATCH]: 'checkpoint_mismatch',
};

const VerifyQuery = z.object({
  checkpoint: uuid.optional().describe('Also check the chain against this checkpoint of the org'),
});

const CheckpointsQuery = z.object({
  limit: intQuery(1, 1000, 'Page size (default 100)').optional(),
  offset: intQuery(0, 2 ** 31 - 1, 'How many to skip').optional(),
});

function checkpointBody(c: Checkpoint): z.infer<typeof AuditCheckpointResponse> {
  return {
    id: c.id,
    org_id: c.orgId,
    sequence: Number(c.sequence),
    head_hash: c.headHash,
    created_at: c.createdAt,
    key_id: c.keyId,
    signature: c.signature,
  };
}

function keyBody(k: CheckpointKeyInfo | undefined): z.infer<typeof CheckpointKey> {
  return { key_id: k?.keyId ?? '', public_key: k?.publicKey ?? '', public_key_pem: k?.publicKeyPem ?? '' };
}

const ACTION = /^[a-z0-9_]+(\.[a-z0-9_]+)+$/;

const EventsQuery = z.object({
  limit: intQuery(1, 1000, 'Page size (default 100)').optional(),
  offset: intQuery(0, 2 ** 31 - 1, 'How many to skip').optional(),
  action: queryString
    .max(100, 'must be a dotted action name such as secret.read')
    .regex(ACTION, 'must be a dotted action name such as secret.read')
    .optional()
    .describe('Only records of this action, e.g. `secret.read`'),
});

/** How far back the shadow report looks when `since` is not given. */
const SHADOW_REPORT_DEFAULT_MS = 7 * 86_400_000;

const ShadowReportQuery = z.object({
  since: queryString
    .pipe(isoDateTime)
    .optional()
    .describe('Count records created at or after this time (ISO 8601); default seven days ago'),
});

const ShadowReportResponse = z.object({
  since: dateTime,
  total: z.number().int().describe('Every `guardrail_shadow.would_deny` record since `since`'),
  reason_codes: z
    .array(
      z.object({
        reason_code: z.string().describe('The guardrail that would have refused, e.g. `tx_max_value`'),
        count: z.number().int(),
        last_at: dateTime.describe('The newest such record'),
      }),
    )
    .describe('Most frequent first'),
});

function auditEventBody(e: AuditEvent): z.infer<typeof AuditEventResponse> {
  return {
    id: e.id,
    org_id: e.orgId,
    sequence: Number(e.sequence),
    action: e.action,
    actor_type: e.actorType,
    actor_id: e.actorId ?? null,
    resource_type: e.resourceType,
    resource_id: e.resourceId ?? null,
    details: e.details ?? {},
    ip_address: e.ipAddress ?? null,
    request_id: e.requestId ?? null,
    created_at: e.createdAt,
    prev_hash: e.prevHash,
    integrity_hash: e.integrityHash,
    key_version: e.keyVersion,
  };
}

/**
 * Where the scheme is documented: this operation in the server's own OpenAPI document, at the
 * address the request came in on (an absolute URI, as the reference's `format: uri` asks; every
 * install serves it).
 */
export function verifyDocumentation(req: Request): string {
  const host = req.get('host') ?? '';
  const origin = `${req.protocol}://${/^[A-Za-z0-9.\-:[\]]{1,300}$/.test(host) ? host : 'localhost'}`;
  return `${origin}/v1/openapi.json#/paths/${VERIFY_PATH.replaceAll('/', '~1')}/get`;
}

function verifyBody(r: VerifyResponse, documentation: string): z.infer<typeof AuditVerifyResponse> {
  return {
    chain_valid: r.chainValid,
    events_checked: Number(r.eventsChecked),
    events_verified: Number(r.eventsVerified),
    broken_at_event_id: r.brokenAtEventId ?? null,
    broken_at_sequence: r.brokenAtSequence !== undefined ? Number(r.brokenAtSequence) : null,
    reason: REASON_NAMES[r.reason] ?? null,
    checkpoint: r.checkpoint
      ? {
          id: r.checkpoint.id,
          sequence: Number(r.checkpoint.sequence),
          signature_valid: r.checkpoint.signatureValid,
          record_matches: r.checkpoint.recordMatches,
          head_at_or_after: r.checkpoint.headAtOrAfter,
        }
      : null,
    scheme: {
      algorithm: r.scheme?.algorithm ?? '',
      chain_structure: r.scheme?.chainStructure ?? '',
      hash_field: r.scheme?.hashField ?? '',
      link_field: r.scheme?.linkField ?? '',
      documentation,
    },
  };
}

/** The org's audit log (spec §4.7); the audit service checks that the caller is an owner or admin. */
export function auditRoutes(peers: Peers, guards: Guards): Router {
  const router = Router();
  const audit = peers.client(AuditServiceClient, 'audit');
  const call = unaryCaller(audit);

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/audit/events',
      access: 'authenticated',
      summary: "The org's audit records, newest first (owners and admins)",
      tag: 'audit',
      query: EventsQuery,
      responses: { 200: { description: 'A page of records', schema: AuditEventsResponse } },
    },
    async (_req, res, { query }) => {
      const r = await call(audit.listEvents, {
        limit: query.limit ?? 100,
        offset: query.offset ?? 0,
        action: query.action ?? '',
      });
      res.json({ events: r.records.map(auditEventBody), count: Number(r.count) });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/org/guardrail-shadow-report',
      access: 'authenticated',
      summary:
        "What the org's `log`-mode guardrails let through: `guardrail_shadow.would_deny` records counted by reason_code (owners and admins)",
      tag: 'audit',
      query: ShadowReportQuery,
      responses: { 200: { description: 'The counts', schema: ShadowReportResponse } },
    },
    async (_req, res, { query }) => {
      const since = query.since ?? new Date(Date.now() - SHADOW_REPORT_DEFAULT_MS).toISOString();
      const r = await call(audit.guardrailShadowReport, { since });
      res.json({
        since: new Date(since).toISOString(),
        total: Number(r.total),
        reason_codes: r.reasonCodes.map((x) => ({
          reason_code: x.reasonCode,
          count: Number(x.count),
          last_at: x.lastAt,
        })),
      });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: VERIFY_PATH,
      access: 'authenticated',
      summary:
        "Verify the org's hash chain: every record's HMAC-SHA256 and link, naming the first broken " +
        'record (owners and admins)',
      tag: 'audit',
      query: VerifyQuery,
      responses: { 200: { description: 'The verification result', schema: AuditVerifyResponse } },
    },
    async (req, res, { query }) => {
      const r = await call(audit.verify, { checkpointId: query.checkpoint ?? '' });
      res.json(verifyBody(r, verifyDocumentation(req)));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/audit/checkpoints',
      access: 'authenticated',
      summary:
        "The org's signed checkpoints of its chain head, newest first, and the public key (owners and admins)",
      tag: 'audit',
      query: CheckpointsQuery,
      responses: { 200: { description: 'A page of checkpoints', schema: AuditCheckpointsResponse } },
    },
    async (_req, res, { query }) => {
      const r = await call(audit.listCheckpoints, { limit: query.limit ?? 100, offset: query.offset ?? 0 });
      res.json({
        checkpoints: r.checkpoints.map(checkpointBody),
        count: Number(r.count),
        key: keyBody(r.key),
      });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/audit/checkpoints',
      access: 'authenticated',
      summary: "Sign a checkpoint of the org's chain head now (owners and admins)",
      tag: 'audit',
      responses: { 201: { description: 'The checkpoint', schema: AuditCheckpointResponse } },
    },
    async (_req, res) => {
      const r = await call(audit.createCheckpoint, {});
      res.status(201).json(checkpointBody(r.checkpoint!));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/audit/export',
      access: 'authenticated',
      summary:
        "Export the org's records, checkpoints and checkpoint public key as JSON for the offline " +
        'verifier tools/audit-verify (owners and admins)',
      tag: 'audit',
      query: z.object({}),
      responses: { 200: { description: 'The export', schema: AuditExportResponse } },
    },
    async (req, res) => {
      // Every checkpoint first, then the records up to the head read with their first page: a
      // checkpoint is never past the head unless records were removed (the head only grows), so a
      // periodic checkpoint made meanwhile cannot make an honest export look truncated, and one
      // past the head is evidence, kept.
      const checkpoints: z.infer<typeof AuditCheckpointResponse>[] = [];
      let key: CheckpointKeyInfo | undefined;
      for (let offset = 0; ; offset += 1000) {
        const r = await call(audit.listCheckpoints, { limit: 1000, offset });
        key = r.key;
        checkpoints.push(...r.checkpoints.map(checkpointBody));
        if (r.checkpoints.length < 1000) break;
      }
      const events: z.infer<typeof AuditEventResponse>[] = [];
      const first = await call(audit.exportEvents, { fromSequence: '1', limit: EXPORT_PAGE });
      const head = { sequence: Number(first.headSequence), hash: first.headHash };
      let page = first;
      for (;;) {
        for (const e of page.records) if (Number(e.sequence) <= head.sequence) events.push(auditEventBody(e));
        const next = Number(page.nextSequence);
        if (next === 0 || next > head.sequence) break;
        page = await call(audit.exportEvents, { fromSequence: String(next), limit: EXPORT_PAGE });
      }
      res.json({
        format: 'custos-audit-export-v1',
        org_id: req.principal?.orgId ?? '',
        exported_at: new Date().toISOString(),
        head,
        events,
        checkpoints,
        key: keyBody(key),
      });
    },
  );

  return router;
}
