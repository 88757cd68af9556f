import type { TokenVerifier } from '@custos/auth';
import type { FederationServiceServer } from '@custos/proto/custos/identity/v1/federation';
import type { AsyncService, Database } from '@custos/service-kit';
import type { PolicyClient } from '../peers/policy-client.js';
import { AgentStore } from '../agents/agent-store.js';
import { GoogleIdTokenVerifier } from '../google/google-id-token.js';
import { GoogleSignInService, type SignInStarter } from '../google/google-signin-service.js';
import { GoogleStore } from '../google/google-store.js';
import { UserStore } from '../users/user-store.js';
import type { FederationKey } from './federation-fns.js';
import { FederationService } from './federation-service.js';

export { FederationServiceService } from '@custos/proto/custos/identity/v1/federation';

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

/** Builds the federation and Google sign-in rules from the composition root's parts. */
export function federationService(deps: {
  db: Database;
  verifier: TokenVerifier;
  users: SignInStarter;
  key: FederationKey | undefined;
  issuer: string;
  policy: PolicyClient;
  google: { clientIds: string[]; issuers: string[]; jwksUrl: string };
}): AsyncService<FederationServiceServer> {
  const googleVerifier =
    deps.google.clientIds.length > 0 ? new GoogleIdTokenVerifier(deps.google) : undefined;
  return federationGrpc({
    federation: new FederationService(
      new AgentStore(deps.db),
      deps.verifier,
      deps.key,
      deps.issuer,
      deps.policy,
    ),
    google: new GoogleSignInService(
      googleVerifier,
      new UserStore(deps.db),
      new GoogleStore(deps.db),
      deps.users,
    ),
  });
}
