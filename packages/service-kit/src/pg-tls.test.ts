import { pgTlsProblem } from './pg-tls';

describe('pgTlsProblem', () => {
  it('accepts a verified URL naming a host, and any URL that asks for no verification', () => {
    expect(
      pgTlsProblem('postgres://u:p@db.internal:5432/custos?sslmode=verify-full&sslrootcert=/ca.crt'),
    ).toBeUndefined();
    expect(pgTlsProblem('postgres://u:p@127.0.0.1:5432/custos')).toBeUndefined();
    expect(pgTlsProblem('postgres://u:p@127.0.0.1:5432/custos?sslmode=disable')).toBeUndefined();
    expect(pgTlsProblem('postgres://u:p@127.0.0.1:5432/custos?sslmode=no-verify')).toBeUndefined();
  });

  it('refuses a verified URL with an IPv4 or IPv6 host, naming no password', () => {
    for (const u of [
      'postgres://u:s3cret@10.0.0.5:5432/custos?sslmode=verify-full',
      'postgres://u:s3cret@[fd00::5]:5432/custos?sslmode=require',
      'postgres://u:s3cret@10.0.0.5:5432/custos?sslrootcert=/ca.crt',
    ]) {
      const problem = pgTlsProblem(u);
      expect(problem).toMatch(/IP address .*use the DNS name the server certificate carries/);
      expect(problem).not.toContain('s3cret');
    }
  });
});
