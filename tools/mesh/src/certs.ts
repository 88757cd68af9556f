import { X509Certificate, createPrivateKey } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  type MeshCa,
  type MeshCertFiles,
  createMeshCa,
  issueMeshCert,
  meshCertFiles,
  writeMeshCa,
  writeMeshCert,
} from '@custos/testing';
import { SERVICES, type ServiceName } from './services';

export { type MeshCertFiles, meshCertFiles };

const DAY_MS = 86_400_000;

/** The mTLS certificates of one mesh: a CA and a certificate per service, as files in `dir`. */
export interface MeshCerts {
  dir: string;
  /** The CA certificate every service trusts (GRPC_TLS_CA_FILE). */
  caFile: string;
  /** Whether the CA was found in `dir` and kept (dev mode across restarts) rather than made now. */
  reusedCa: boolean;
  /** A service's GRPC_TLS_CA_FILE, GRPC_TLS_CERT_FILE and GRPC_TLS_KEY_FILE, for serviceEnv. */
  envOf(
    service: ServiceName,
  ): Record<'GRPC_TLS_CA_FILE' | 'GRPC_TLS_CERT_FILE' | 'GRPC_TLS_KEY_FILE', string>;
}

/** How to make a mesh's certificates. */
export interface MakeMeshCertsOptions {
  /** Where the files go (made 0700 if missing). Default: a new folder under the system's temp folder. */
  dir?: string;
  /**
   * Keep the CA already in `dir` (`ca.crt` and `ca.key`) when it is still valid for a week, so
   * what trusted it before still does (dev mode). Default false: a new CA every time.
   */
  reuseCa?: boolean;
  /** Default: all nine. */
  services?: readonly ServiceName[];
  /** Validity of a new CA (default 365 days) and of each service certificate (default 30 days). */
  caValidDays?: number;
  certValidDays?: number;
}

/** The CA in `dir` when it is usable for at least another week: parsable, its key matching. */
function existingCa(dir: string): MeshCa | undefined {
  try {
    const certPem = fs.readFileSync(path.join(dir, 'ca.crt'), 'utf8');
    const keyPem = fs.readFileSync(path.join(dir, 'ca.key'), 'utf8');
    const cert = new X509Certificate(certPem);
    if (!cert.ca || !cert.checkPrivateKey(createPrivateKey(keyPem))) return undefined;
    if (new Date(cert.validTo).getTime() - Date.now() < 7 * DAY_MS) return undefined;
    return { certPem, keyPem };
  } catch {
    return undefined;
  }
}

/**
 * Makes a mesh's certificates: the CA (reused from `dir` when asked and still good, else new; its
 * key `ca.key` stays in `dir`, mode 0600, and no service is given it), then a fresh certificate per
 * service with URI SAN `spiffe://custos/<service>`, DNS SANs `localhost` and the service name and
 * IP SAN 127.0.0.1. Key files are mode 0600.
 */
export async function makeMeshCerts(o: MakeMeshCertsOptions = {}): Promise<MeshCerts> {
  const dir = o.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'custos-mesh-certs-'));
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const kept = o.reuseCa ? existingCa(dir) : undefined;
  const ca = kept ?? (await createMeshCa({ validDays: o.caValidDays ?? 365 }));
  if (!kept) writeMeshCa(dir, ca, true);
  for (const s of o.services ?? SERVICES) {
    writeMeshCert(dir, s, await issueMeshCert(ca, s, { validDays: o.certValidDays ?? 30 }));
  }
  const caFile = meshCertFiles(dir, 'ca').caFile;
  return {
    dir,
    caFile,
    reusedCa: kept !== undefined,
    envOf(service) {
      const f = meshCertFiles(dir, service);
      return { GRPC_TLS_CA_FILE: f.caFile, GRPC_TLS_CERT_FILE: f.certFile, GRPC_TLS_KEY_FILE: f.keyFile };
    },
  };
}
