import path from 'node:path';
import type { Client, ClientOptions, ChannelCredentials } from '@grpc/grpc-js';
import { addrVar } from '@custos/mesh';
import { MeshTls, createGrpcClient } from '@custos/service-kit';
import { type MeshCertFiles, meshCertFiles } from '@custos/testing';
import type { Mesh, ServiceName } from './mesh';

/** The folder of a mesh's certificates: where its GRPC_TLS_CA_FILE lies. */
function certDir(mesh: Mesh): string {
  const ca = mesh.env['GRPC_TLS_CA_FILE'];
  if (!ca) throw new Error('this mesh has no GRPC_TLS_CA_FILE in its environment');
  return path.dirname(ca);
}

/** The certificate files the launcher made for `service` (what a process holding them can present). */
export function certFilesOf(mesh: Mesh, service: ServiceName): MeshCertFiles {
  return meshCertFiles(certDir(mesh), service);
}

/** `host:port` of a service's gRPC server. */
export function grpcAddress(mesh: Mesh, service: ServiceName): string {
  const addr = mesh.env[addrVar(service)];
  if (!addr) throw new Error(`no ${addrVar(service)} in the mesh's environment`);
  return addr;
}

type ClientCtor<C> = new (
  address: string,
  credentials: ChannelCredentials,
  options?: Partial<ClientOptions>,
) => C;

/**
 * A gRPC client of `peer` in `mesh`, from this test process acting as `as` (with that service's
 * certificate from the mesh's folder). `close()` closes the client and stops watching the files.
 */
export function grpcClientAs<C extends Client>(
  mesh: Mesh,
  as: ServiceName,
  Ctor: ClientCtor<C>,
  peer: ServiceName,
): { client: C; close(): void } {
  const tls = new MeshTls(certFilesOf(mesh, as));
  const client = createGrpcClient(Ctor, grpcAddress(mesh, peer), {
    tls,
    peer,
    deadlineMs: 5000,
    maxAttempts: 1,
  });
  return {
    client,
    close() {
      client.close();
      tls.close();
    },
  };
}
