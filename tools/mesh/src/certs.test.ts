import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makeMeshCerts } from './certs';
import { SERVICES } from './services';

describe('makeMeshCerts', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-certs-test-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('writes a CA and a certificate per service naming it, keys readable by the owner only', async () => {
    const certs = await makeMeshCerts({ dir });
    const ca = new X509Certificate(fs.readFileSync(certs.caFile));
    expect(ca.ca).toBe(true);
    for (const s of SERVICES) {
      const env = certs.envOf(s);
      expect(env.GRPC_TLS_CA_FILE).toBe(certs.caFile);
      const cert = new X509Certificate(fs.readFileSync(env.GRPC_TLS_CERT_FILE));
      expect(cert.subjectAltName).toBe(
        `URI:spiffe://custos/${s}, DNS:localhost, DNS:${s}, IP Address:127.0.0.1`,
      );
      expect(cert.verify(ca.publicKey)).toBe(true);
      expect(fs.statSync(env.GRPC_TLS_KEY_FILE).mode & 0o777).toBe(0o600);
    }
    expect(fs.statSync(path.join(dir, 'ca.key')).mode & 0o777).toBe(0o600);
  });

  it('keeps a valid CA when asked (dev mode), with new service certificates, and makes a new one otherwise', async () => {
    const first = await makeMeshCerts({ dir, services: ['gateway'] });
    const caPem = fs.readFileSync(first.caFile, 'utf8');
    const certPem = fs.readFileSync(first.envOf('gateway').GRPC_TLS_CERT_FILE, 'utf8');
    const again = await makeMeshCerts({ dir, services: ['gateway'], reuseCa: true });
    expect(again.reusedCa).toBe(true);
    expect(fs.readFileSync(again.caFile, 'utf8')).toBe(caPem);
    expect(fs.readFileSync(again.envOf('gateway').GRPC_TLS_CERT_FILE, 'utf8')).not.toBe(certPem);
    const fresh = await makeMeshCerts({ dir, services: ['gateway'] });
    expect(fresh.reusedCa).toBe(false);
    expect(fs.readFileSync(fresh.caFile, 'utf8')).not.toBe(caPem);
  });

  it('replaces a dev CA that expires within a week', async () => {
    await makeMeshCerts({ dir, services: ['gateway'], caValidDays: 3 });
    const caPem = fs.readFileSync(path.join(dir, 'ca.crt'), 'utf8');
    const again = await makeMeshCerts({ dir, services: ['gateway'], reuseCa: true });
    expect(again.reusedCa).toBe(false);
    expect(fs.readFileSync(again.caFile, 'utf8')).not.toBe(caPem);
  });
});
