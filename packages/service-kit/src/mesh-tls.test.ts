import { meshIdentityOf } from './mesh-tls';

describe('meshIdentityOf', () => {
  it('reads the one spiffe://custos/<service> URI among the SANs', () => {
    expect(meshIdentityOf('DNS:localhost, URI:spiffe://custos/vault-crypto, IP Address:127.0.0.1')).toBe(
      'vault-crypto',
    );
    expect(meshIdentityOf('URI:spiffe://custos/gateway')).toBe('gateway');
  });

  it('names no identity when there is none, more than one, or a malformed one', () => {
    expect(meshIdentityOf(undefined)).toBeUndefined();
    expect(meshIdentityOf('DNS:gateway, IP Address:127.0.0.1')).toBeUndefined();
    expect(meshIdentityOf('URI:spiffe://custos/gateway, URI:spiffe://custos/signer')).toBeUndefined();
    expect(meshIdentityOf('URI:spiffe://other/gateway')).toBeUndefined();
    expect(meshIdentityOf('URI:spiffe://custos/gateway/extra')).toBeUndefined();
    expect(meshIdentityOf('URI:spiffe://custos/')).toBeUndefined();
    // Node quotes an entry holding ", ": a crafted value never splits into a clean entry.
    expect(meshIdentityOf('URI:"spiffe://x, URI:spiffe://custos/gateway"')).toBeUndefined();
  });
});
