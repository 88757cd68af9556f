import { shareEmail, shareEmailData } from './share-mail-consumer';

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

  it('links the public share route and says how the passphrase travels', () => {
    const mail = shareEmail(DATA, 'https://custos.test');
    expect(mail.template).toBe('share-link');
    expect(mail.text).toContain(`https://custos.test/v1/share/${DATA.share_id}`);
    expect(mail.text).toContain('X-Share-Passphrase');
    expect(mail.text).toContain('opened once');
    expect(
      shareEmail({ ...DATA, passphrase_protected: false, max_access_count: 3 }, 'https://c.test').text,
    ).not.toContain('passphrase');
  });
});
