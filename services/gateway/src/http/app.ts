import express, { type Express } from 'express';
import type net from 'node:net';
import type { Redis } from 'ioredis';
import type { Registry } from 'prom-client';
import type { Logger } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import type { IdentityKeys } from '@custos/auth';
import { accountRoutes } from './account-routes.js';
import { accessLog } from './access-log.js';
import { agentRoutes } from './agent-routes.js';
import { approvalRoutes } from './approval-routes.js';
import { auditRoutes } from './audit-routes.js';
import { guardrailRoutes } from './guardrail-routes.js';
import { authRoutes } from './auth-routes.js';
import { authenticate, humanOnly } from './authenticate.js';
import { connectIpFilter } from './ip-filter.js';
import { ipRuleRoutes } from './ip-rule-routes.js';
import { keyRoutes } from './key-routes.js';
import { federationRoutes } from './federation-routes.js';
import { mfaRoutes } from './mfa-routes.js';
import { orgRoutes } from './org-routes.js';
import { routerKeyRoutes } from './router-key-routes.js';
import { healthRoutes } from './health-routes.js';
import { billingRoutes } from './billing-routes.js';
import { policyRoutes } from './policy-routes.js';
import { vaultRoutes } from './vault-routes.js';
import { shareRoutes } from './share-routes.js';
import { webhookRoutes } from './webhook-routes.js';
import { chainRoutes } from './chain-routes.js';
import { signingKeyRoutes } from './signing-key-routes.js';
import { custodyRoutes } from './custody-routes.js';
import { signRoutes } from './sign-routes.js';
import { transactionRoutes } from './transaction-routes.js';
import { errorHandler, notFound, requireJsonBody } from './problem.js';
import { HotRoutes, hotDispatcher } from './hot-routes.js';
import { openApiRoutes } from './openapi-routes.js';
import { pageRoutes } from './page-routes.js';
import { ROUTE_TABLE } from './routes.js';
import { type BucketLimit, exchangeRateLimit, rateLimit } from './rate-limit.js';
import { requestContext } from './request-context.js';

/** Public routes that check a credential: each attempt is also held to the stricter auth limit. */
export const CREDENTIAL_ROUTES = [
  '/v1/auth/token',
  '/v1/auth/refresh',
  '/v1/auth/agent-token',
  '/v1/auth/api-key-token',
  '/v1/auth/signup',
  '/v1/auth/verify-email',
  '/v1/auth/forgot-password',
  '/v1/auth/reset-password',
  '/v1/auth/undo-email-change',
  '/v1/auth/mfa/verify',
  '/v1/auth/federated-token',
  '/v1/org/invites/accept',
  '/v1/auth/google',
];

/**
 * The key exchanges: limited per key (agent or user) and, with a large bound, per client IP, once
 * their body is read (exchangeRateLimit), instead of by the strict per-IP credential limit.
 */
export const EXCHANGE_ROUTES = ['/v1/auth/agent-token', '/v1/auth/api-key-token'];

/** Routes that also take an `application/x-www-form-urlencoded` body (RFC 8693 clients send forms). */
export const FORM_ROUTES = ['/v1/auth/federated-token'];

/** What the HTTP app needs. */
export interface AppDeps {
  logger: Logger;
  /** CUSTODY_REGION_HEADER: a trusted ingress header holding the client's country, for signer's geofencing. */
  custodyRegionHeader?: string | undefined;
  registry: Registry;
  redis: Redis;
  peers: Peers;
  trustedProxies: net.BlockList;
  rateLimit: { ratePerSecond: number; burst: number };
  /** A stricter limit on credential exchanges, against password guessing (per client IP). */
  authRateLimit?: { ratePerSecond: number; burst: number };
  /** The limits of the key exchanges (EXCHANGE_ROUTES); without them, they share authRateLimit. */
  exchangeRateLimit?: { perKey: BucketLimit; perIp: BucketLimit };
  /** The gateway's own dependencies (Redis) that are down now, for /v1/health. */
  ownDependenciesDown?: () => string[];
  healthTimeoutMs: number;
  identityKeys: IdentityKeys;
  /** How long an org's IP rules are cached (IP_RULES_CACHE_TTL_MS); 5 s when not given. */
  ipRulesCacheTtlMs?: number;
}

/**
 * The public HTTP API. Middleware runs in spec §7 order: request context (id, client IP, trace)
 * and access log first, then audit context, rate limit, x402, auth, IP filter, usage counting,
 * quota headers, handler. Stages that need services not yet built (audit, x402, auth, IP filter,
 * usage) are added here by the issues that build them, in that order.
 */
export function createApp(deps: AppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);

  // The stages before routing. Routes declared `hot` are served by the dispatcher, first: it runs
  // these same three stages, then the route's guards and handler, skipping Express's walk over
  // every route (the body stages have nothing to do for the bodiless requests it takes).
  const before = [
    requestContext(deps.trustedProxies),
    accessLog(deps.logger, deps.registry),
    rateLimit({ redis: deps.redis, ...deps.rateLimit, logger: deps.logger }),
  ];
  const hot = new HotRoutes();
  const onError = errorHandler(deps.logger);
  app.use(hotDispatcher(hot, before, onError));
  app.use(...before);
  if (deps.authRateLimit) {
    app.post(
      deps.exchangeRateLimit
        ? CREDENTIAL_ROUTES.filter((r) => !EXCHANGE_ROUTES.includes(r))
        : CREDENTIAL_ROUTES,
      rateLimit({
        redis: deps.redis,
        ...deps.authRateLimit,
        logger: deps.logger,
        scope: 'auth',
        failClosed: true,
      }),
    );
  }
  app.use(requireJsonBody(FORM_ROUTES));
  app.use(express.json({ limit: '1mb', strict: true }));
  if (deps.authRateLimit && deps.exchangeRateLimit) {
    app.post(
      EXCHANGE_ROUTES,
      exchangeRateLimit({
        redis: deps.redis,
        logger: deps.logger,
        ...deps.exchangeRateLimit,
        malformed: deps.authRateLimit,
      }),
    );
  }

  // Routes declare their access; `authenticate` (spec §7's auth stage) sits in front of the
  // handler of every non-public route, so unknown paths still answer 404.
  const auth = authenticate(deps.identityKeys);
  // The IP filter (spec §7) runs right after auth: it needs the caller's org.
  const ipRules = connectIpFilter(deps.peers, deps.ipRulesCacheTtlMs ?? 5000, deps.logger);
  const guards = {
    authenticated: [auth, ipRules.filter],
    human: [auth, ipRules.filter, humanOnly],
    hot,
  };
  app.use(healthRoutes(deps.peers, deps.healthTimeoutMs, deps.logger, guards, deps.ownDependenciesDown));
  app.use(authRoutes(deps.peers.identity, deps.identityKeys, guards));
  app.use(agentRoutes(deps.peers, guards));
  app.use(guardrailRoutes(deps.peers, guards));
  app.use(keyRoutes(deps.peers.identity, guards));
  // Further route groups (MFA, account security, orgs) mount below, one line each.
  app.use(accountRoutes(deps.peers, guards));
  app.use(mfaRoutes(deps.peers, guards));
  app.use(orgRoutes(deps.peers, guards));
  app.use(routerKeyRoutes(deps.peers, guards));
  app.use(federationRoutes(deps.peers, guards));
  app.use(vaultRoutes(deps.peers, guards));
  app.use(shareRoutes(deps.peers, guards));
  app.use(policyRoutes(deps.peers, guards));
  app.use(ipRuleRoutes(deps.peers, ipRules.cache, guards));
  app.use(billingRoutes(deps.peers, guards));
  app.use(auditRoutes(deps.peers, guards));
  app.use(webhookRoutes(deps.peers, guards));
  app.use(chainRoutes(deps.peers, guards));
  app.use(signingKeyRoutes(deps.peers, guards, { regionHeader: deps.custodyRegionHeader }));
  app.use(custodyRoutes(deps.peers, guards));
  app.use(signRoutes(deps.peers, guards));
  app.use(transactionRoutes(deps.peers, guards));
  app.use(approvalRoutes(deps.peers, guards));

  app.use(pageRoutes(deps));
  app.use(openApiRoutes(ROUTE_TABLE));

  app.use(notFound(ROUTE_TABLE));
  app.use(onError);
  return app;
}
