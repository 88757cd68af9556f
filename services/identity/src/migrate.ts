import path from 'node:path';
import { runMigrations } from '@custos/service-kit';
import { SCHEMA } from './db/schema.js';

runMigrations({
  name: 'identity',
  schema: SCHEMA,
  migrationsFolder: path.join(__dirname, '..', 'migrations'),
  tablePrivileges: {
    // A signing key enters only through identity.insert_signing_key (migration 0006), which checks
    // its shape, and leaves only through identity.prune_signing_keys (0007), a day after it retired;
    // the role may read keys and retire them, never add or remove one by hand.
    signing_keys: ['SELECT', 'UPDATE'],
  },
});
