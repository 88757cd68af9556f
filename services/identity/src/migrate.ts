import path from 'node:path';
import { runMigrations } from '@custos/service-kit';
import { SCHEMA } from './db/schema.js';

runMigrations({
  name: 'identity',
  schema: SCHEMA,
  migrationsFolder: path.join(__dirname, '..', 'migrations'),
  tablePrivileges: {
    // A signing key enters only through identity.insert_signing_key (0006), which checks its shape,
    // is retired or revoked only through retire_signing_keys / revoke_signing_key (0008), with the
    // server's clock, and leaves only through prune_signing_keys (0007), a day after it retired.
    signing_keys: ['SELECT'],
  },
});
