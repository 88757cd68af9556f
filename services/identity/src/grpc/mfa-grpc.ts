import type { TokenVerifier } from '@custos/auth';
import type { MfaServiceServer } from '@custos/proto/custos/identity/v1/mfa';
import type { AsyncService } from '@custos/service-kit';
import { callerResolver } from './caller.js';
import type { MfaService } from '../mfa/mfa-service.js';

/** gRPC adapter of MfaService: decode, call the rules, encode. */
export function mfaGrpc(deps: { mfa: MfaService; verifier: TokenVerifier }): AsyncService<MfaServiceServer> {
  const caller = callerResolver(deps.verifier);

  return {
    async setupMfa(req, call) {
      const r = await deps.mfa.setup(await caller(call), req.credential);
      return { secret: r.secret, otpauthUri: r.otpauthUri };
    },
    async verifyMfaSetup(req, call) {
      const r = await deps.mfa.verifySetup(await caller(call), req.code);
      return { recoveryCodes: r.recoveryCodes };
    },
    async verifyMfa(req) {
      const t = await deps.mfa.verify(req.mfaToken, req.code);
      return {
        tokens: {
          accessToken: t.accessToken,
          tokenType: t.tokenType,
          expiresIn: t.expiresIn,
          refreshToken: t.refreshToken,
        },
      };
    },
    async getMfaStatus(_req, call) {
      const r = await deps.mfa.status(await caller(call));
      return { enabled: r.enabled, recoveryCodesRemaining: r.recoveryCodesRemaining };
    },
    async disableMfa(req, call) {
      await deps.mfa.disable(await caller(call), req.code, req.credential);
      return {};
    },
  };
}
