import net from 'node:net';

// sslmode values with which node-postgres (8.x) verifies the server certificate, and its host name.
const VERIFYING_MODES = new Set(['prefer', 'require', 'verify-ca', 'verify-full']);

/**
 * Why a Postgres URL's TLS settings would not protect what the operator thinks, or undefined when
 * they are fine. node-postgres checks the certificate of a server reached by IP address against the
 * name `localhost` (it sends no server name for an IP, and Node then falls back to `localhost`), so
 * `sslmode=verify-full` with an IP host would accept any certificate the CA issued for localhost and
 * refuse the right one: the URL must name the host as the certificate does. Names no password.
 */
export function pgTlsProblem(url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined; // not a URL pg would read either; pg says why when it connects
  }
  const mode = u.searchParams.get('sslmode');
  const verifies = (mode !== null && VERIFYING_MODES.has(mode)) || u.searchParams.has('sslrootcert');
  if (!verifies) return undefined;
  const host = u.hostname.replace(/^\[|\]$/g, '');
  if (net.isIP(host) !== 0)
    return (
      `the URL asks for a verified TLS connection (sslmode=${mode ?? 'verify-full'}) to an IP address (${host}); ` +
      'node-postgres cannot check a certificate against an IP address: use the DNS name the server certificate carries'
    );
  return undefined;
}
