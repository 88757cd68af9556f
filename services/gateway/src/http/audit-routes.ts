import type { RequestHandler } from 'express';
import { Router } from 'express';
import { AuditServiceClient } from '@custos/proto/custos/audit/v1/service';
import { InvalidArgumentError, unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { intParam } from './query.js';
import { declareUncheckedRoute } from './routes.js';

/** The org's audit log (spec §4.7); the audit service checks that the caller is an owner or admin. */
export function auditRoutes(
  peers: Peers,
  guards: { authenticated: RequestHandler[]; human: RequestHandler[] },
): Router {
  const router = Router();
  const audit = peers.client(AuditServiceClient, 'audit');
  const call = unaryCaller(audit);

  declareUncheckedRoute(router, guards, 'get', '/v1/audit/events', 'authenticated', async (req, res) => {
    const action = req.query['action'];
    if (action !== undefined && typeof action !== 'string')
      throw new InvalidArgumentError('action', 'action must be given once, as a string');
    const r = await call(audit.listEvents, {
      limit: intParam(req, 'limit', 100, 1, 1000),
      offset: intParam(req, 'offset', 0, 0, 2 ** 31 - 1),
      action: action ?? '',
    });
    res.json({ events: r.events, count: Number(r.count) });
  });

  declareUncheckedRoute(router, guards, 'get', '/v1/audit/verify', 'authenticated', async (_req, res) => {
    const r = await call(audit.verify, {});
    res.json(r.result);
  });

  return router;
}
