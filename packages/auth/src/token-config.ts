import { env } from '@custos/service-kit';

/**
 * The token settings every service that verifies access tokens (and identity, which issues them)
 * takes from its own configuration. They never come from a peer's answer: a service that trusted
 * the issuer or audience identity told it would trust whatever a party in the middle said.
 */
export const tokenTrustConfigShape = {
  TOKEN_ISSUER: env
    .url('Canonical issuer (`iss`) of access tokens: the public base URL.', ['http', 'https'])
    .default('http://127.0.0.1:8080'),
  TOKEN_LEGACY_ISSUERS: env.list('Comma-separated former issuers whose tokens still validate.'),
  TOKEN_AUDIENCE: env.string('Audience (`aud`) of access tokens.').default('custos-api'),
};

/**
 * Issuers (canonical first) and audience of a parsed tokenTrustConfigShape. The gateway and
 * identity accept the public audience (`TOKEN_AUDIENCE`); a service behind the gateway passes its
 * own name (`service`) and accepts only the tokens identity re-signed for it,
 * `<TOKEN_AUDIENCE>:<service>` — so a token it sees is refused by the public API and by its peers.
 */
export function tokenTrustOf(
  c: {
    TOKEN_ISSUER: string;
    TOKEN_LEGACY_ISSUERS: string[];
    TOKEN_AUDIENCE: string;
  },
  service?: string,
): {
  issuers: string[];
  audience: string;
} {
  return {
    issuers: [c.TOKEN_ISSUER, ...c.TOKEN_LEGACY_ISSUERS],
    audience: service ? `${c.TOKEN_AUDIENCE}:${service}` : c.TOKEN_AUDIENCE,
  };
}
