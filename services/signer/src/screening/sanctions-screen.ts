import { readFile, stat } from 'node:fs/promises';
import type { RuleMatch } from '@custos/approval-rules';
import type { Principal } from '@custos/auth';
import { auditOf } from '@custos/events';
import {
  CustosError,
  type Database,
  type Logger,
  PermissionDeniedError,
  describeError,
} from '@custos/service-kit';
import { failClosed, writeSignerAudit } from '../audit/signer-audit.js';
import type { ChainFamily } from '../chains/chain-types.js';
import {
  type ListFormat,
  type SanctionsList,
  SanctionsListError,
  listCounts,
  normalizeAddress,
  parseSanctionsList,
} from './sanctions-list.js';

/** A list older than this pauses screened transfers (SPEC §7, §8: 503 after seven days). */
export const SANCTIONS_MAX_AGE_MS = 7 * 24 * 3600 * 1000;

/** The most a sanctions document may weigh (OFAC's sdn.csv is a few MiB). */
export const SANCTIONS_LIST_MAX_BYTES = 64 * 1024 * 1024;

/** Problem types of screening's answers. */
export const SCREENING_TYPES = {
  blocked: 'sanctions_blocked',
  stale: 'sanctions_list_stale',
  unavailable: 'sanctions_list_unavailable',
} as const;

/** What a screening found for one request. */
export type ScreenResult =
  | { hit: false; list: string }
  | { hit: true; list: string; family: ChainFamily; chain: string; address: string };

/** Where the list comes from (SANCTIONS_LIST_URL or SANCTIONS_LIST_FILE) and how it is read. */
export interface SanctionsSource {
  url?: string | undefined;
  file?: string | undefined;
  format: ListFormat;
  /** The list's name when the document names none (SANCTIONS_LIST_NAME). */
  name: string;
  /** Bound of one fetch of the URL. */
  timeoutMs: number;
}

interface Loaded {
  list: SanctionsList;
  /** What staleness is measured from: the list's publication time, else its fetch/file time. */
  asOf: Date;
  loadedAt: Date;
}

/** 503 with a problem type: transfers to screened addresses wait for a usable list. */
function unavailable(type: string, detail: string, list?: string): CustosError {
  return new CustosError('unavailable', {
    type,
    detail,
    ...(list ? { extensions: { list } } : {}),
  });
}

/**
 * Sanctions screening (issue 20): the configured list, loaded at start and refreshed on a schedule
 * (each replica loads its own copy), and the check of a transfer's recipients against it. Every
 * replica decides staleness from the list's own time (`published_at`, else when its source was
 * fetched or written), not from when it loaded it.
 */
export class SanctionsScreen {
  private current: Loaded | undefined;
  private lastError: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly deps: {
      source: SanctionsSource | undefined;
      logger: Logger;
      db?: Database;
      /** The clock (tests move it). */
      now?: () => Date;
      fetchImpl?: typeof fetch;
    },
  ) {}

  private now(): Date {
    return this.deps.now ? this.deps.now() : new Date();
  }

  /** True when a list source is configured (SANCTIONS_LIST_URL or SANCTIONS_LIST_FILE). */
  get configured(): boolean {
    return !!(this.deps.source?.url || this.deps.source?.file);
  }

  /** The list in use and what its age is measured from (undefined before a first load). */
  get status(): { name: string; asOf: Date; loadedAt: Date; counts: Record<string, number> } | undefined {
    const c = this.current;
    return c
      ? { name: c.list.name, asOf: c.asOf, loadedAt: c.loadedAt, counts: listCounts(c.list) }
      : undefined;
  }

  private async fetchText(): Promise<{ text: string; fetchedAt: Date }> {
    const s = this.deps.source!;
    if (s.url) {
      const f = this.deps.fetchImpl ?? fetch;
      const res = await f(s.url, { signal: AbortSignal.timeout(s.timeoutMs), redirect: 'follow' });
      if (!res.ok) throw new SanctionsListError(`the list URL answered HTTP ${res.status}`);
      const declared = Number(res.headers.get('content-length') ?? '0');
      if (declared > SANCTIONS_LIST_MAX_BYTES) throw new SanctionsListError('the list is too large');
      const buf = Buffer.from(await res.arrayBuffer());
      if (buf.length > SANCTIONS_LIST_MAX_BYTES) throw new SanctionsListError('the list is too large');
      return { text: buf.toString('utf8'), fetchedAt: this.now() };
    }
    const st = await stat(s.file!);
    if (st.size > SANCTIONS_LIST_MAX_BYTES) throw new SanctionsListError('the list file is too large');
    return { text: await readFile(s.file!, 'utf8'), fetchedAt: st.mtime };
  }

  /**
   * Loads the list once: on success it replaces the one in use; on failure the previous one stays
   * (and keeps ageing) and the failure is logged without the document's content. Never throws.
   */
  async refresh(): Promise<boolean> {
    if (!this.configured) return false;
    if (this.running) {
      await this.running;
      return this.lastError === undefined;
    }
    let ok = false;
    this.running = (async () => {
      try {
        const { text, fetchedAt } = await this.fetchText();
        const s = this.deps.source!;
        const list = parseSanctionsList(text, s.format, s.name);
        const asOf = list.publishedAt ?? fetchedAt;
        this.current = { list, asOf, loadedAt: this.now() };
        this.lastError = undefined;
        ok = true;
        this.deps.logger.info(
          { list: list.name, as_of: asOf.toISOString(), counts: listCounts(list), skipped: list.skipped },
          'sanctions list loaded',
        );
      } catch (err) {
        this.lastError =
          err instanceof SanctionsListError ? err.message : String(describeError(err)['message'] ?? 'failed');
        this.deps.logger.error(
          {
            err: this.lastError,
            source: this.deps.source?.url ? 'url' : 'file',
            list_in_use: this.current?.list.name ?? null,
          },
          'sanctions list not loaded; the previous one (if any) stays in use',
        );
      }
    })();
    try {
      await this.running;
    } finally {
      this.running = undefined;
    }
    return ok;
  }

  /** Loads the list now, then again every `intervalMs` (a failed load is tried at the next tick). */
  async start(intervalMs: number): Promise<void> {
    if (!this.configured) return;
    await this.refresh();
    this.timer = setInterval(() => void this.refresh(), intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (this.running) await this.running.catch(() => undefined);
  }

  /**
   * Screens a transfer's recipients on one chain: `{hit: false}` or the first listed address.
   * 503 (`sanctions_list_unavailable`) when no list is configured or none could be loaded yet;
   * 503 (`sanctions_list_stale`, naming the list) when the list is older than seven days.
   * Call it only when the agent's `address_screening_policy.mode` is `deny` or `approve`.
   */
  check(o: { family: ChainFamily; chain: string; to: string | readonly string[] }): ScreenResult {
    if (!this.configured) {
      throw unavailable(
        SCREENING_TYPES.unavailable,
        'address screening is on for this agent but no sanctions list is configured; transfers are paused',
      );
    }
    const c = this.current;
    if (!c) {
      throw unavailable(
        SCREENING_TYPES.unavailable,
        'the sanctions list could not be loaded yet; transfers are paused until it is',
      );
    }
    const age = this.now().getTime() - c.asOf.getTime();
    if (age > SANCTIONS_MAX_AGE_MS) {
      throw unavailable(
        SCREENING_TYPES.stale,
        `the sanctions list ${c.list.name} is older than seven days (as of ${c.asOf.toISOString()}); transfers are paused until it is refreshed`,
        c.list.name,
      );
    }
    const set = c.list.addresses.get(o.family);
    const targets = typeof o.to === 'string' ? [o.to] : o.to;
    for (const t of targets) {
      if (!t) continue;
      const a = normalizeAddress(o.family, t);
      if (set?.has(a)) return { hit: true, list: c.list.name, family: o.family, chain: o.chain, address: a };
    }
    return { hit: false, list: c.list.name };
  }

  /**
   * The whole screening step of a transfer, by the agent's `address_screening_policy.mode`:
   * `off` (or unset) screens nothing; a hit under `deny` writes `sanctions.blocked` (chain, family,
   * address, list; fail-closed) and throws 403 `sanctions_blocked` naming the list; a hit under
   * `approve` is returned for the caller to hold the transfer for a human (see
   * `sanctionsApprovalRule`). An unknown mode is treated as `deny`.
   */
  async screen(
    p: Principal,
    agentId: string,
    mode: string | undefined,
    o: { family: ChainFamily; chain: string; to: string | readonly string[] },
  ): Promise<ScreenResult | undefined> {
    const m = (mode ?? '').trim().toLowerCase();
    if (m === '' || m === 'off') return undefined;
    const r = this.check(o);
    if (!r.hit || m === 'approve') return r;
    await this.auditBlocked(p, agentId, r);
    throw new PermissionDeniedError(
      `the recipient ${r.address} is on the sanctions list ${r.list}; nothing was signed`,
      { type: SCREENING_TYPES.blocked, extensions: { list: r.list } },
    );
  }

  /** Writes `sanctions.blocked` in a transaction of its own (fail-closed: no record, 503). */
  async auditBlocked(p: Principal, agentId: string, r: ScreenResult & { hit: true }): Promise<void> {
    const db = this.deps.db;
    if (!db) throw unavailable(SCREENING_TYPES.unavailable, 'screening has no database to audit with');
    const record = auditOf(
      p,
      'sanctions.blocked',
      { type: 'agent', id: agentId },
      { list: r.list, chain: r.chain, family: r.family, address: r.address },
    );
    await failClosed(this.deps.logger, record.action, () =>
      db.transaction((tx) => writeSignerAudit(tx, record)),
    );
  }
}

/**
 * The approval match a sanctions hit under `approve` is held with: highest risk tier, one human
 * decision, the approvals service's default expiry; the approver's preview shows it as the
 * deciding rule (`reason: sanctions_hit`, the list, chain and address).
 */
export function sanctionsApprovalMatch(r: ScreenResult & { hit: true }): RuleMatch {
  return {
    tier: 3,
    ruleIndex: -1,
    rule: { conditions: [], riskTier: 3, skipWhen: [], requireWhen: [] },
    ruleJson: {
      reason: 'sanctions_hit',
      list: r.list,
      chain: r.chain,
      address: r.address,
      risk_tier: 3,
    },
  };
}
