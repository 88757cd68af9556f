// @peculiar/x509 resolves its ASN.1 schemas through tsyringe, which needs the Reflect metadata API.
import 'reflect-metadata';
import { X509Certificate, createPrivateKey, randomBytes, webcrypto } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import * as x509 from '@peculiar/x509';

// Node's WebCrypto is what the library wants; its types name the DOM's `Crypto`, absent from this lib.
x509.cryptoProvider.set(webcrypto as never);

/** The URI SAN prefix of a mesh identity: `spiffe://custos/<service>`. */
export const MESH_URI_PREFIX = 'spiffe://custos/';

const EC = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGNING = { name: 'ECDSA', hash: 'SHA-256' } as const;
const DAY_MS = 86_400_000;

/** A mesh certificate authority: its certificate and private key, PEM. */
export interface MeshCa {
  certPem: string;
  keyPem: string;
}

/** A certificate issued by a mesh CA, with its private key (PEM), serial and validity. */
export interface MeshCert {
  certPem: string;
  keyPem: string;
  /** Hexadecimal, as `X509Certificate.serialNumber` prints it. */
  serialNumber: string;
  notBefore: Date;
  notAfter: Date;
}

/** The three files a service reads: GRPC_TLS_CA_FILE, GRPC_TLS_CERT_FILE, GRPC_TLS_KEY_FILE. */
export interface MeshCertFiles {
  caFile: string;
  certFile: string;
  keyFile: string;
}

function serial(): string {
  const b = randomBytes(16);
  b[0] = b[0]! & 0x7f; // a positive INTEGER
  return b.toString('hex');
}

async function pemKeys(keys: webcrypto.CryptoKeyPair): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
  return createPrivateKey({ key: der, format: 'der', type: 'pkcs8' })
    .export({ format: 'pem', type: 'pkcs8' })
    .toString();
}

function generateKeys(): Promise<webcrypto.CryptoKeyPair> {
  return webcrypto.subtle.generateKey(EC, true, ['sign', 'verify']) as Promise<webcrypto.CryptoKeyPair>;
}

/** Creates a throwaway mesh CA (ECDSA P-256), valid for `validDays` from now. */
export async function createMeshCa(opts: { commonName?: string; validDays?: number } = {}): Promise<MeshCa> {
  const keys = await generateKeys();
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${opts.commonName ?? 'Custos mesh CA'}`,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + (opts.validDays ?? 365) * DAY_MS),
    signingAlgorithm: SIGNING,
    keys: keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await pemKeys(keys) };
}

/**
 * Issues the certificate of one mesh service: URI SAN `spiffe://custos/<service>` (its identity),
 * DNS SANs `localhost` and the service name, IP SAN 127.0.0.1; usable as TLS server and client.
 */
export async function issueMeshCert(
  ca: MeshCa,
  service: string,
  opts: { validDays?: number; notBefore?: Date } = {},
): Promise<MeshCert> {
  const caCert = new x509.X509Certificate(ca.certPem);
  const caDer = createPrivateKey(ca.keyPem).export({ format: 'der', type: 'pkcs8' });
  const caKey = await webcrypto.subtle.importKey('pkcs8', caDer, EC, false, ['sign']);
  const keys = await generateKeys();
  const notBefore = opts.notBefore ?? new Date(Date.now() - 60_000);
  const notAfter = new Date(notBefore.getTime() + 60_000 + (opts.validDays ?? 30) * DAY_MS);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${service}`,
    issuer: caCert.subject,
    notBefore,
    notAfter,
    signingAlgorithm: SIGNING,
    publicKey: keys.publicKey,
    signingKey: caKey,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([
        x509.ExtendedKeyUsage.serverAuth,
        x509.ExtendedKeyUsage.clientAuth,
      ]),
      new x509.SubjectAlternativeNameExtension([
        { type: 'url', value: `${MESH_URI_PREFIX}${service}` },
        { type: 'dns', value: 'localhost' },
        { type: 'dns', value: service },
        { type: 'ip', value: '127.0.0.1' },
      ]),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(caCert.publicKey),
    ],
  });
  const pem = cert.toString('pem');
  const parsed = new X509Certificate(pem);
  return {
    certPem: pem,
    keyPem: await pemKeys(keys),
    serialNumber: parsed.serialNumber,
    notBefore: new Date(parsed.validFrom),
    notAfter: new Date(parsed.validTo),
  };
}

/** Where a service's files lie in a mesh certificate folder: `ca.crt`, `<service>.crt`, `<service>.key`. */
export function meshCertFiles(dir: string, service: string): MeshCertFiles {
  return {
    caFile: path.join(dir, 'ca.crt'),
    certFile: path.join(dir, `${service}.crt`),
    keyFile: path.join(dir, `${service}.key`),
  };
}

/** Writes `content` to `file` through a temporary file and a rename, so a reader never sees half of it. */
export function writeFileAtomic(file: string, content: string, mode: number): void {
  const tmp = `${file}.${randomBytes(4).toString('hex')}.tmp`;
  fs.writeFileSync(tmp, content, { mode });
  fs.chmodSync(tmp, mode);
  fs.renameSync(tmp, file);
}

/** Writes a service's certificate and key (mode 0600) into `dir`; returns its three file paths. */
export function writeMeshCert(dir: string, service: string, cert: MeshCert): MeshCertFiles {
  const files = meshCertFiles(dir, service);
  // The key first: a reader that sees the new certificate finds its key already there.
  writeFileAtomic(files.keyFile, cert.keyPem, 0o600);
  writeFileAtomic(files.certFile, cert.certPem, 0o644);
  return files;
}

/** Writes the CA certificate (`ca.crt`) and, when `withKey`, its key (`ca.key`, 0600) into `dir`. */
export function writeMeshCa(dir: string, ca: MeshCa, withKey: boolean): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (withKey) writeFileAtomic(path.join(dir, 'ca.key'), ca.keyPem, 0o600);
  writeFileAtomic(path.join(dir, 'ca.crt'), ca.certPem, 0o644);
}

/**
 * A fresh CA and a certificate per service written into `dir` (for in-process tests): returns the
 * CA and each service's files. The CA key stays in memory only.
 */
export async function writeTestMeshCerts(
  dir: string,
  services: readonly string[],
): Promise<{ ca: MeshCa; files: Record<string, MeshCertFiles> }> {
  const ca = await createMeshCa({ commonName: 'Custos test mesh CA', validDays: 2 });
  writeMeshCa(dir, ca, false);
  const files: Record<string, MeshCertFiles> = {};
  for (const s of services) files[s] = writeMeshCert(dir, s, await issueMeshCert(ca, s, { validDays: 1 }));
  return { ca, files };
}
