import path from 'node:path';
import { runMigrations } from '@custos/service-kit';
import { AUDIT_TABLE_PRIVILEGES, SCHEMA } from './db/schema.js';

// The audit role reads and appends records but never changes them (migration 0002's trigger
// refuses that for every role, too), and cannot disable the trigger: it owns nothing.
runMigrations({
  name: 'audit',
  schema: SCHEMA,
  migrationsFolder: path.join(__dirname, '..', 'migrations'),
  tablePrivileges: AUDIT_TABLE_PRIVILEGES,
});
