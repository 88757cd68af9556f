import { Metadata } from '@grpc/grpc-js';
import { Router } from 'express';
import { z } from 'zod/v4';
import {
  DEPENDENCIES_HEALTH_ENTRY,
  DEPENDENCY_HEALTH_PREFIX,
  ServingStatus,
  callUnary,
  currentRequestContext,
  runWithRequestContext,
  type Logger,
} from '@custos/service-kit';
import { checkPeer, healthOf, type PeerState, type Peers } from '../peers.js';
import { cachedAnswer } from './cached-answer.js';
import { UNAVAILABLE_RETRY_AFTER_SECONDS, sendProblem } from './problem.js';
import { type Guards, declareRoute } from './routes.js';

const HealthResponse = z.object({
  status: z.literal('ok'),
  services: z.record(z.string(), z.string()).describe('Each service and its state (`serving`, …)'),
  dependencies_unavailable: z
    .record(z.string(), z.array(z.string()))
    .optional()
    .describe(
      'Present when a service cannot reach a dependency (`postgres`, `nats`, `redis`) it keeps serving without',
    ),
});
const HsmHealthResponse = z.object({
  status: z.literal('ok'),
  provider: z.string().describe('`local`, `aws-kms` or `pkcs11`'),
  latency_ms: z.number(),
});

/**
 * Public health endpoints. GET /v1/health asks every peer service over gRPC and is ok only when all
 * serve; GET /v1/health/hsm reports vault-crypto's key-management provider.
 */
export function healthRoutes(
  peers: Peers,
  timeoutMs: number,
  logger: Logger,
  guards: Guards,
  ownDependenciesDown: () => string[] = () => [],
): Router {
  const router = Router();

  // The KMS self-test is a call to the provider (AWS, an HSM) that anyone may trigger: one answer,
  // healthy or not, serves every caller for HSM_HEALTH_CACHE_MS, and callers arriving while it is
  // being asked share that one call. A failure to ask vault-crypto at all is not kept.
  const kmsHealth = cachedAnswer(HSM_HEALTH_CACHE_MS, () => {
    // A public probe acts for nobody: whatever Authorization header it came with is not turned
    // into a service token (a stale one would otherwise make the probe answer 401).
    const requestId = currentRequestContext()?.requestId ?? 'health';
    return runWithRequestContext({ requestId }, () =>
      callUnary(peers.vaultCrypto, peers.vaultCrypto.getKmsHealth, {}, new Metadata(), {
        deadline: Date.now() + timeoutMs,
      }),
    );
  });

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/health',
      access: 'public',
      summary: 'Whether every service of the mesh is serving (503 naming those that are not)',
      tag: 'health',
      responses: { 200: { description: 'All services serve', schema: HealthResponse } },
    },
    async (_req, res) => {
      const states = await Promise.all(
        peers.health.map(async (p) => {
          const [state, deps] = await Promise.all([
            checkPeer(p.client, timeoutMs),
            dependenciesDown(p.client, timeoutMs),
          ]);
          return [p.name, state, deps] as const;
        }),
      );
      const services: Record<string, PeerState> = {
        gateway: 'serving',
        ...Object.fromEntries(states.map(([name, state]) => [name, state])),
      };
      // Which dependency each service cannot reach (Postgres, NATS, Redis), when any.
      const dependencies = Object.fromEntries(
        [
          ['gateway', ownDependenciesDown()] as const,
          ...states.map(([name, , deps]) => [name, deps] as const),
        ].filter(([, deps]) => deps.length > 0),
      );
      const extra = Object.keys(dependencies).length > 0 ? { dependencies_unavailable: dependencies } : {};
      // A service that cannot reach Redis still serves, but refuses every token (the revocation check
      // fails closed): for someone asking "does the API work", it does not.
      const down = [
        ...(ownDependenciesDown().includes('redis') ? ['gateway'] : []),
        ...states.filter(([, s, deps]) => s !== 'serving' || deps.includes('redis')).map(([name]) => name),
      ];
      if (down.length === 0) {
        res.json({ status: 'ok', services, ...extra });
        return;
      }
      res.setHeader('Retry-After', UNAVAILABLE_RETRY_AFTER_SECONDS);
      const why = (name: string) =>
        dependencies[name] ? ` (${dependencies[name].join(', ')} unreachable)` : '';
      sendProblem(res, {
        type: 'about:blank',
        title: 'Service Unavailable',
        status: 503,
        detail: `not serving: ${down.map((name) => `${name}${why(name)}`).join(', ')}`,
        unavailable: down,
        services,
        ...extra,
      });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/health/hsm',
      access: 'public',
      summary: "The key-management provider's self-test (one answer serves every caller for 15 s)",
      tag: 'health',
      responses: { 200: { description: 'The provider answered', schema: HsmHealthResponse } },
    },
    async (_req, res) => {
      const h = await kmsHealth();
      const latency_ms = Math.round(h.latencyMs * 1000) / 1000;
      if (h.healthy) {
        res.json({ status: 'ok', provider: h.provider, latency_ms });
        return;
      }
      // The provider's own message (ARNs, slot numbers) goes to the log, not to the public.
      logger.warn({ provider: h.provider, detail: h.detail }, 'key-management provider unhealthy');
      res.setHeader('Retry-After', UNAVAILABLE_RETRY_AFTER_SECONDS);
      sendProblem(res, {
        type: 'about:blank',
        title: 'Service Unavailable',
        status: 503,
        detail: `key-management provider ${h.provider} failed its self-test`,
        provider: h.provider,
        latency_ms,
      });
    },
  );

  return router;
}

const DEPENDENCIES = ['postgres', 'nats', 'redis'] as const;

/** How long one KMS self-test answers GET /v1/health/hsm (issue 16: 10–30 s). */
export const HSM_HEALTH_CACHE_MS = 15_000;

/**
 * The dependencies a peer reports unreachable in its health (`custos.dependencies`, then each
 * `custos.dependency.<name>`): one call when all is well, unknown entries (an older peer) count as none.
 */
async function dependenciesDown(
  client: Peers['health'][number]['client'],
  timeoutMs: number,
): Promise<string[]> {
  const status = (service: string) => healthOf(client, service, timeoutMs);
  if ((await status(DEPENDENCIES_HEALTH_ENTRY)) !== ServingStatus.NOT_SERVING) return [];
  const each = await Promise.all(
    DEPENDENCIES.map(async (d) => [d, await status(DEPENDENCY_HEALTH_PREFIX + d)] as const),
  );
  return each.filter(([, s]) => s === ServingStatus.NOT_SERVING).map(([d]) => d);
}
