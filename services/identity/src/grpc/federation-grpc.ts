import type { FederationServiceServer } from '@custos/proto/custos/identity/v1/federation';
import type { AsyncService } from '@custos/service-kit';
import type { FederationService } from '../federation/federation-service.js';
import type { GoogleSignInService } from '../google/google-signin-service.js';

/** gRPC adapter of FederationService: decode, call the rules, encode. */
export function federationGrpc(deps: {
  federation: FederationService;
  google: GoogleSignInService;
}): AsyncService<FederationServiceServer> {
  return {
    async exchangeFederatedToken(req) {
      const t = await deps.federation.exchange({
        grantType: req.grantType,
        subjectToken: req.subjectToken,
        subjectTokenType: req.subjectTokenType,
        audience: req.audience,
        scope: req.scope,
        requestedTokenType: req.requestedTokenType,
      });
      return {
        accessToken: t.accessToken,
        issuedTokenType: t.issuedTokenType,
        tokenType: t.tokenType,
        expiresIn: t.expiresIn,
        scope: t.scope,
      };
    },
    async googleSignIn(req) {
      const r = await deps.google.signIn(req.idToken);
      if (r.kind === 'mfa') return { result: { $case: 'mfa', value: r.challenge } };
      return { result: { $case: 'tokens', value: { ...r.tokens } } };
    },
  };
}
