import { X509Certificate, createPrivateKey } from 'node:crypto';
import fs from 'node:fs';
import { createSecureContext } from 'node:tls';
import { type ChannelCredentials, type ServerCredentials, experimental } from '@grpc/grpc-js';
import { describeError, type Logger } from './logger.js';

/** The URI SAN prefix of a mesh identity: a service's certificate names `spiffe://custos/<service>`. */
export const MESH_URI_PREFIX = 'spiffe://custos/';

/** The nine mesh identities: one certificate per service, its name the URI SAN's last segment. */
export const MESH_SERVICES = [
  'gateway',
  'identity',
  'vault-crypto',
  'policy',
  'signer',
  'approvals',
  'audit',
  'webhook-dispatcher',
  'billing',
] as const;

/** One mesh identity. */
export type MeshService = (typeof MESH_SERVICES)[number];

/** The PEM files of this process's mesh identity and the CA it trusts. */
export interface MeshTlsFiles {
  caFile: string;
  certFile: string;
  keyFile: string;
}

/** Raised when the mesh certificate files cannot be used (missing, unparsable, key not matching...). */
export class MeshTlsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MeshTlsError';
  }
}

/**
 * The mesh identity a certificate's subjectAltName (Node's `subjectaltname` string) names:
 * `URI:spiffe://custos/<name>` → `<name>`; undefined unless exactly one such entry is there.
 */
export function meshIdentityOf(subjectAltName: string | undefined): string | undefined {
  if (!subjectAltName) return undefined;
  const prefix = `URI:${MESH_URI_PREFIX}`;
  // Node quotes an entry that holds a comma, so a split on ", " never makes up a clean entry.
  const ids = subjectAltName
    .split(', ')
    .filter((e) => e.startsWith(prefix))
    .map((e) => e.slice(prefix.length));
  const [only] = ids;
  return ids.length === 1 && only && /^[a-z][a-z0-9-]*$/.test(only) ? only : undefined;
}

/** The verified mesh identity of a server call's peer (its client certificate's URI SAN), if any. */
export function callerIdentity(call: {
  getAuthContext(): { sslPeerCertificate?: { subjectaltname?: string } };
}): string | undefined {
  return meshIdentityOf(call.getAuthContext().sslPeerCertificate?.subjectaltname);
}

/** What is loaded from the three files, checked. */
interface MeshMaterial {
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
  identity: string;
  serialNumber: string;
  notAfter: string;
}

const PEM_CERT = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

function certificatesIn(pem: Buffer, what: string): X509Certificate[] {
  const blocks = pem.toString('utf8').match(PEM_CERT) ?? [];
  if (blocks.length === 0) throw new MeshTlsError(`${what} holds no PEM certificate`);
  try {
    return blocks.map((b) => new X509Certificate(b));
  } catch (err) {
    throw new MeshTlsError(`${what} holds a certificate that does not parse: ${(err as Error).message}`);
  }
}

function readFile(file: string, what: string): Buffer {
  try {
    return fs.readFileSync(file);
  } catch (err) {
    throw new MeshTlsError(`${what} ${file} cannot be read: ${(err as NodeJS.ErrnoException).code ?? err}`);
  }
}

/** Peers' clocks may differ this much: a certificate this close to its validity window still loads. */
const CLOCK_SKEW_MS = 5 * 60 * 1000;

/**
 * True when `cert` leads to one of `authorities` through CA certificates of `chain` (each link
 * issued and signed by the next), as a peer verifying it would find; at most a few links.
 */
function chainsToAuthority(
  cert: X509Certificate,
  chain: X509Certificate[],
  authorities: X509Certificate[],
  depth = 0,
): boolean {
  if (depth > 4) return false;
  const signedBy = (i: X509Certificate) => cert.checkIssued(i) && cert.verify(i.publicKey);
  if (authorities.some(signedBy)) return true;
  return chain.some((i) => i.ca && signedBy(i) && chainsToAuthority(i, chain, authorities, depth + 1));
}

/** Reads and checks the files: parsable, the key matches, the CA issued the certificate, one mesh identity. */
function loadMaterial(files: MeshTlsFiles): MeshMaterial {
  const ca = readFile(files.caFile, 'GRPC_TLS_CA_FILE');
  const cert = readFile(files.certFile, 'GRPC_TLS_CERT_FILE');
  const key = readFile(files.keyFile, 'GRPC_TLS_KEY_FILE');
  const authorities = certificatesIn(ca, 'GRPC_TLS_CA_FILE');
  const [leaf, ...chain] = certificatesIn(cert, 'GRPC_TLS_CERT_FILE');
  let privateKey;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    throw new MeshTlsError('GRPC_TLS_KEY_FILE holds no usable private key');
  }
  if (!leaf!.checkPrivateKey(privateKey)) {
    throw new MeshTlsError('GRPC_TLS_KEY_FILE is not the key of the certificate in GRPC_TLS_CERT_FILE');
  }
  if (!chainsToAuthority(leaf!, chain, authorities)) {
    throw new MeshTlsError(
      'the certificate in GRPC_TLS_CERT_FILE is not issued by the CA in GRPC_TLS_CA_FILE',
    );
  }
  const now = Date.now();
  if (Date.parse(leaf!.validFrom) > now + CLOCK_SKEW_MS || Date.parse(leaf!.validTo) < now - CLOCK_SKEW_MS) {
    throw new MeshTlsError(
      `the certificate in GRPC_TLS_CERT_FILE is not valid now (${leaf!.validFrom} – ${leaf!.validTo})`,
    );
  }
  const identity = meshIdentityOf(leaf!.subjectAltName);
  if (!identity) {
    throw new MeshTlsError(
      `the certificate in GRPC_TLS_CERT_FILE names no single ${MESH_URI_PREFIX}<service> URI`,
    );
  }
  try {
    createSecureContext({ ca, cert, key });
  } catch (err) {
    throw new MeshTlsError(`the mesh certificate files do not make a TLS context: ${(err as Error).message}`);
  }
  return { ca, cert, key, identity, serialNumber: leaf!.serialNumber, notAfter: leaf!.validTo };
}

function statSignature(files: MeshTlsFiles): string | undefined {
  try {
    return [files.caFile, files.certFile, files.keyFile]
      .map((f) => {
        const s = fs.statSync(f);
        return `${s.ino}:${s.size}:${s.mtimeMs}`;
      })
      .join('|');
  } catch {
    return undefined; // a file is being replaced: look again at the next tick
  }
}

type CaListener = experimental.CaCertificateUpdateListener;
type IdentityListener = experimental.IdentityCertificateUpdateListener;

/**
 * This process's mesh identity: the CA, certificate and key from three PEM files, watched for
 * changes. Renewed files are picked up without a restart (new connections use them; connections
 * already open keep theirs); files that are half-written or do not fit together are ignored with a
 * warning and the last good ones stay in use. gRPC servers and clients get their credentials here.
 */
export class MeshTls implements experimental.CertificateProvider {
  private material: MeshMaterial;
  private signature: string | undefined;
  private failedSignature: string | undefined;
  private readonly caListeners = new Set<CaListener>();
  private readonly identityListeners = new Set<IdentityListener>();
  private readonly channels = new Map<string, ChannelCredentials>();
  private server: ServerCredentials | undefined;
  private readonly timer: NodeJS.Timeout;

  /** Loads the files now (throwing a MeshTlsError if they are unusable) and watches them every `refreshMs`. */
  constructor(
    private readonly files: MeshTlsFiles,
    private readonly opts: { logger?: Logger; refreshMs?: number } = {},
  ) {
    this.signature = statSignature(files);
    this.material = loadMaterial(files);
    this.timer = setInterval(() => this.reload(), opts.refreshMs ?? 1000);
    this.timer.unref();
  }

  /** The mesh identity of this process's certificate (`spiffe://custos/<identity>`). */
  get identity(): string {
    return this.material.identity;
  }

  /** Serial number and expiry of the certificate in use. */
  get certificate(): { serialNumber: string; notAfter: string } {
    return { serialNumber: this.material.serialNumber, notAfter: this.material.notAfter };
  }

  /**
   * Looks at the files now; when they changed and are usable, switches to them and tells the
   * servers and channels. Returns whether it switched.
   */
  reload(): boolean {
    const signature = statSignature(this.files);
    if (signature === undefined || signature === this.signature) return false;
    let next: MeshMaterial;
    try {
      next = loadMaterial(this.files);
      if (next.identity !== this.material.identity) {
        throw new MeshTlsError(
          `the new certificate names '${next.identity}', not '${this.material.identity}'`,
        );
      }
    } catch (err) {
      if (signature !== this.failedSignature) {
        this.failedSignature = signature;
        this.opts.logger?.warn(
          { err: describeError(err) },
          'mesh certificate files changed but are not usable; keeping the current ones',
        );
      }
      return false;
    }
    this.signature = signature;
    this.failedSignature = undefined;
    const changed =
      !next.ca.equals(this.material.ca) ||
      !next.cert.equals(this.material.cert) ||
      !next.key.equals(this.material.key);
    if (!changed) return false;
    this.material = next;
    for (const l of this.identityListeners) l({ certificate: next.cert, privateKey: next.key });
    for (const l of this.caListeners) l({ caCertificate: next.ca });
    this.opts.logger?.info(
      { identity: next.identity, serial: next.serialNumber, not_after: next.notAfter },
      'mesh certificate reloaded',
    );
    return true;
  }

  /** Server credentials: TLS with this certificate, a client certificate from the CA required. */
  serverCredentials(): ServerCredentials {
    this.server ??= experimental.createCertificateProviderServerCredentials(this, this, true);
    return this.server;
  }

  /**
   * Channel credentials to call `peer`: this certificate as the client's, and the server's must
   * chain to the CA and name `spiffe://custos/<peer>` (host names are not used).
   */
  channelCredentials(peer: string): ChannelCredentials {
    let creds = this.channels.get(peer);
    if (!creds) {
      creds = experimental.createCertificateProviderChannelCredentials(this, this, {
        checkServerIdentity: (_host, cert) => {
          const id = meshIdentityOf(cert.subjectaltname);
          return id === peer
            ? undefined
            : new Error(`the server's certificate is ${id ? `'${id}'` : 'no mesh identity'}, not '${peer}'`);
        },
      });
      this.channels.set(peer, creds);
    }
    return creds;
  }

  /** Stops watching the files. */
  close(): void {
    clearInterval(this.timer);
  }

  // experimental.CertificateProvider: grpc-js asks for the current files and is told of new ones.

  /** @internal */
  addCaCertificateListener(listener: CaListener): void {
    this.caListeners.add(listener);
    // Later, as grpc-js expects: a server registers its own watcher right after this call.
    process.nextTick(() => {
      if (this.caListeners.has(listener)) listener({ caCertificate: this.material.ca });
    });
  }

  /** @internal */
  removeCaCertificateListener(listener: CaListener): void {
    this.caListeners.delete(listener);
  }

  /** @internal */
  addIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.add(listener);
    process.nextTick(() => {
      if (this.identityListeners.has(listener)) {
        listener({ certificate: this.material.cert, privateKey: this.material.key });
      }
    });
  }

  /** @internal */
  removeIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.delete(listener);
  }
}
