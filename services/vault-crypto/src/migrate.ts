import path from 'node:path';
import { runMigrations } from '@custos/service-kit';
import { SCHEMA } from './db/schema.js';

runMigrations({
  name: 'vault-crypto',
  schema: SCHEMA,
  migrationsFolder: path.join(__dirname, '..', 'migrations'),
});
