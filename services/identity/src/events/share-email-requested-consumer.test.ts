import { CustosError, GoneError, NotFoundError, UnavailableError } from '@custos/service-kit';
import { nothingToMail, shareEmailData } from './share-email-requested-consumer';

const SHARE = '6f1c1a52-8d8e-4c58-9a8e-2f1b7c1d9e01';
const ORG = '0b6d3c1e-7a2f-4e8b-9c1d-5e6f7a8b9c0d';

describe('share e-mails', () => {
  it('reads the share and org of an event and drops malformed ones', () => {
    expect(shareEmailData({ org_id: ORG, data: { share_id: SHARE } })).toEqual({
      share_id: SHARE,
      org_id: ORG,
    });
    expect(shareEmailData({ org_id: ORG, data: { share_id: '../x' } })).toBeUndefined();
    expect(shareEmailData({ org_id: null, data: { share_id: SHARE } })).toBeUndefined();
    expect(shareEmailData({ org_id: 'not-an-org', data: { share_id: SHARE } })).toBeUndefined();
    expect(shareEmailData({ org_id: ORG, data: {} })).toBeUndefined();
  });

  it('reads an event of the earlier shape by its share alone (its secret and address are not used)', () => {
    const old = {
      share_id: SHARE,
      link_secret: 'q0Fz1w2b3c4d5e6f7g8h9i0j1k2l3m4n5o6p7q8r9s-',
      email: 'bob@example.com',
      expires_at: '2030-01-02T00:00:00.000Z',
    };
    expect(shareEmailData({ org_id: ORG, data: old })).toEqual({ share_id: SHARE, org_id: ORG });
  });

  it('mails nothing for a share that is unknown or closed, and retries on any other failure', () => {
    expect(nothingToMail(new NotFoundError('share', SHARE))).toBe(true);
    expect(nothingToMail(new GoneError('this share was revoked'))).toBe(true);
    expect(nothingToMail(new UnavailableError('vault-crypto is unavailable'))).toBe(false);
    expect(nothingToMail(new CustosError('permission_denied', { detail: 'permission denied' }))).toBe(false);
    expect(nothingToMail(new Error('socket hang up'))).toBe(false);
  });
});
