import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Principal } from '@custos/auth';
import {
  type Database,
  type Logger,
  createDatabase,
  createPool,
  migrateSchema,
  provisionServiceRole,
  serviceRoleName,
} from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { AUDIT_TABLE_PRIVILEGES, SCHEMA } from '../src/db/schema';

/** An org owner acting in `orgId`, as the gRPC edge would hand it to the service. */
export function owner(orgId: string): Principal {
  return {
    kind: 'user',
    userId: randomUUID(),
    orgId,
    role: 'owner',
    platformAdmin: false,
    amr: [],
    requirePasskeyForVaults: false,
  } as unknown as Principal;
}

/**
 * A fresh database with audit's migrations applied by the owner and audit's role provisioned as
 * src/migrate.ts does; `db` connects as that role, as the service does.
 */
export async function auditTestDatabase(
  prefix: string,
  logger: Logger,
  writerPoolSize = 4,
): Promise<{
  adminPool: ReturnType<typeof createPool>;
  /** The pool of audit's own role (what the service connects as). */
  writerPool: ReturnType<typeof createPool>;
  db: Database;
  close(): Promise<void>;
}> {
  const role = serviceRoleName('audit');
  const database = await createTestDatabase(prefix);
  const adminPool = createPool(database.url, 2, logger, 'audit-admin');
  await migrateSchema(adminPool, {
    schema: SCHEMA,
    migrationsFolder: path.join(__dirname, '..', 'migrations'),
  });
  await provisionServiceRole(adminPool, { schema: SCHEMA, role, tablePrivileges: AUDIT_TABLE_PRIVILEGES });
  const url = new URL(database.url);
  url.username = role;
  const writerPool = createPool(url.toString(), writerPoolSize, logger, 'audit-writer');
  return {
    adminPool,
    writerPool,
    db: createDatabase(writerPool),
    async close() {
      await writerPool.end();
      await adminPool.end();
      await database.drop();
    },
  };
}
