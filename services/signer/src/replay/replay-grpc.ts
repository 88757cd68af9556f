import { type IdentityKeys, currentCaller } from '@custos/auth';
import type { GuardrailServiceServer } from '@custos/proto/custos/signer/v1/guardrails';
import type { AsyncService, RpcAccess } from '@custos/service-kit';
import type { GuardrailReplay } from './guardrail-replay.js';
import type { SpendTodayReader } from './spend-today.js';

/** Who may call GuardrailService: the gateway, with the caller's token. */
export const replayAccess: RpcAccess<GuardrailServiceServer> = { default: ['gateway'] };

/** gRPC adapter of the guardrail replay and the day's spend: verify the caller, decode, answer, encode. */
export function replayGrpc(deps: {
  keys: IdentityKeys;
  replay: Pick<GuardrailReplay, 'replay'>;
  spend: Pick<SpendTodayReader, 'list'>;
}): AsyncService<GuardrailServiceServer> {
  return {
    async listSpendToday(req) {
      const agents = await deps.spend.list(await currentCaller(deps.keys), req.agentIds);
      return {
        agents: agents.map((a) => ({ agentId: a.agentId, spentByFamily: a.spentByFamily, count: a.count })),
      };
    },
    async replayGuardrails(req) {
      const r = await deps.replay.replay(await currentCaller(deps.keys), req.agentId, req.days, req.draft);
      return {
        since: r.since.toISOString(),
        evaluated: r.evaluated,
        enforcement: r.enforcement,
        truncated: r.truncated,
        denials: r.denials.map((d) => ({
          transactionId: d.tx.id,
          createdAt: d.tx.createdAt.toISOString(),
          chain: d.tx.chainName,
          to: d.tx.to ?? '',
          value: d.tx.value.toString(),
          verdicts: d.verdicts.map((v) => ({ reasonCode: v.reasonCode, field: v.field, detail: v.detail })),
        })),
      };
    },
  };
}
