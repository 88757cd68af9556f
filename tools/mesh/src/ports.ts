import net from 'node:net';
import { DEFAULT_PORTS, SERVICES, type ServiceName } from './services';

/** Where a mesh listens on 127.0.0.1: the gateway's HTTP port and each service's gRPC and metrics port. */
export interface MeshPorts {
  http: number;
  grpc: Record<ServiceName, number>;
  metrics: Record<ServiceName, number>;
}

/** The services' own default ports (dev mode), with the gateway's HTTP on `httpPort`. */
export function defaultPorts(httpPort = 8080): MeshPorts {
  const grpc = {} as Record<ServiceName, number>;
  const metrics = {} as Record<ServiceName, number>;
  for (const s of SERVICES) {
    grpc[s] = DEFAULT_PORTS[s].grpc;
    metrics[s] = DEFAULT_PORTS[s].metrics;
  }
  return { http: httpPort, grpc, metrics };
}

// Ports this process has handed out: two meshes started by one process never share one.
const handedOut = new Set<number>();

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/**
 * A free port below Linux's ephemeral range (32768+), so that no outgoing connection or `listen(0)`
 * elsewhere on the machine can take it between this check and the service binding it.
 */
export async function freeMeshPort(): Promise<number> {
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 12000);
    if (handedOut.has(port)) continue;
    if (await isFree(port)) {
      handedOut.add(port);
      return port;
    }
  }
}

/** Nineteen free ports for a mesh that must not collide with another one (tests, benchmark). */
export async function freePorts(): Promise<MeshPorts> {
  const grpc = {} as Record<ServiceName, number>;
  const metrics = {} as Record<ServiceName, number>;
  for (const s of SERVICES) {
    grpc[s] = await freeMeshPort();
    metrics[s] = await freeMeshPort();
  }
  return { http: await freeMeshPort(), grpc, metrics };
}
