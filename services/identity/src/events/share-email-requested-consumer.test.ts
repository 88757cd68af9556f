import { shareEmailData } from './share-email-requested-consumer';

const DATA = {
  share_id: '6f1c1a52-8d8e-4c58-9a8e-2f1b7c1d9e01',
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
  });
});
