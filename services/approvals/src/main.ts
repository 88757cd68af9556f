import { connectServiceIdentityKeys } from '@custos/auth';
import { runDataService, startServiceEventMetrics } from '@custos/events';
import { ApprovalsServiceService } from '@custos/proto/custos/approvals/v1/service';
import { AccountServiceClient } from '@custos/proto/custos/identity/v1/account';
import { IdentityServiceClient } from '@custos/proto/custos/identity/v1/service';
import { createGrpcClient } from '@custos/service-kit';
import { ApprovalService } from './approvals/approval-service.js';
import { ApprovalStore } from './approvals/approval-store.js';
import { ApprovalSweeper } from './approvals/approval-sweeper.js';
import { configShape } from './config.js';
import { SCHEMA } from './db/schema.js';
import { approvalsAccess, approvalsGrpc } from './grpc/approvals-grpc.js';
import { IdentityClient } from './peers/identity-client.js';

// Composition root of approvals: identity's keys (callers' tokens), identity as a peer (agents'
// approval policies, step-up checks), the approvals, their gRPC adapter and the expiry sweeper.
runDataService({
  name: 'approvals',
  schema: SCHEMA,
  configShape,
  async start(rt, { db, pool, events }) {
    // Outbox backlog and consumer lag (custos_outbox_*, custos_nats_consumer_*) on /metrics.
    startServiceEventMetrics(rt, { pool, schema: SCHEMA, events });
    const c = rt.config;
    const keys = await connectServiceIdentityKeys(rt);
    const peer = { tls: rt.tls, deadlineMs: c.GRPC_DEADLINE_MS, peer: 'identity' } as const;
    const identity = createGrpcClient(IdentityServiceClient, c.IDENTITY_ADDR, peer);
    const account = createGrpcClient(AccountServiceClient, c.IDENTITY_ADDR, peer);
    rt.onShutdown('identity peer', async () => {
      identity.close();
      account.close();
    });
    const approvals = new ApprovalService({
      store: new ApprovalStore(db),
      identity: new IdentityClient(identity, account),
      settings: { ttlSeconds: c.APPROVAL_TTL_SECONDS },
    });
    rt.grpc.add(ApprovalsServiceService, approvalsGrpc({ keys, approvals }), approvalsAccess);
    const sweeper = new ApprovalSweeper(
      { approvals, logger: rt.logger },
      { intervalMs: c.APPROVAL_SWEEP_INTERVAL_MS, batch: c.APPROVAL_SWEEP_BATCH },
    );
    sweeper.start();
    rt.onShutdown('approval sweeper', () => sweeper.stop());
  },
});
