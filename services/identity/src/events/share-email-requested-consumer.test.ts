import { shareEmailData } from './share-email-requested-consumer';

const DATA = {
  share_id: '6f1c1a52-8d8e-4c58-9a8e-2f1b7c1d9e01',
  link_secret: 'q0Fz1w2b3c4d5e6f7g8h9i0j1k2l3m4n5o6p7q8r9s-',
  email: 'bob@example.com',
  expires_at: '2030-01-02T00:00:00.000Z',
  max_access_count: 1,
  passphrase_protected: true,
};

describe('share e-mails', () => {
  it('reads a well-formed event and drops malformed ones', () => {
    expect(shareEmailData(DATA)).toEqual(DATA);
    expect(shareEmailData({ ...DATA, share_id: '../x' })).toBeUndefined();
    expect(shareEmailData({ ...DATA, email: 'no at sign' })).toBeUndefined();
    expect(shareEmailData({ ...DATA, expires_at: 'soon' })).toBeUndefined();
    // An event from before link secrets (its share no longer opens), or a mangled secret.
    const { link_secret: _, ...old } = DATA;
    expect(shareEmailData(old)).toBeUndefined();
    expect(shareEmailData({ ...DATA, link_secret: 'short' })).toBeUndefined();
    expect(shareEmailData({ ...DATA, link_secret: `${DATA.link_secret.slice(1)}/` })).toBeUndefined();
  });
});
