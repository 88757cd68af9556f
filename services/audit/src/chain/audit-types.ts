import type { BreakReason } from './chain-fns.js';

/** One chained record, as the audit service hands it out. */
export interface AuditEvent {
  id: string;
  orgId: string;
  /** Position in the org's chain, from 1, without gaps. */
  sequence: number;
  action: string;
  actorType: string;
  actorId: string | null;
  resourceType: string;
  resourceId: string | null;
  /** The record's facts, `ip_address` and `request_id` included (the HMAC covers them). */
  details: Record<string, unknown>;
  ipAddress: string | null;
  requestId: string | null;
  createdAt: Date;
  prevHash: string;
  integrityHash: string;
  /** The version of the HMAC key that chained it (AUDIT_HMAC_KEY is 1). */
  keyVersion: number;
}

/** Which records to list. */
export interface AuditQuery {
  /** 1..1000. */
  limit: number;
  /** 0 or more. */
  offset: number;
  /** Only records of this action; every action when absent. */
  action?: string;
}

/** A page of records, newest first, with the number that match in all. */
export interface AuditPage {
  events: AuditEvent[];
  count: number;
}

/** How records are chained, for a client that verifies on its own. */
export interface VerifyScheme {
  algorithm: string;
  chainStructure: string;
  hashField: string;
  linkField: string;
}

/** The outcome of verifying an org's chain. */
export interface VerifyResult {
  chainValid: boolean;
  eventsChecked: number;
  eventsVerified: number;
  /** The first broken record; absent when the chain is valid. */
  broken?: {
    /** Null when the head names records that are all gone. */
    eventId: string | null;
    sequence: number;
    reason: BreakReason;
  };
  scheme: VerifyScheme;
}

/** A record a service without tables (the gateway) asks to append about its caller. */
export interface DirectRecordInput {
  action: string;
  resourceType: string;
  /** Empty when the action concerns no single resource. */
  resourceId: string;
  details: Record<string, unknown>;
}
