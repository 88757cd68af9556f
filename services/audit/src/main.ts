import path from 'node:path';
import { runDataService } from '@custos/events';
import { configShape } from './config.js';
import { SCHEMA } from './db/schema.js';

// The per-org hash-chained audit log. Its RPCs are added by the issues that build them.
runDataService({
  name: 'audit',
  schema: SCHEMA,
  migrationsFolder: path.join(__dirname, '..', 'migrations'),
  configShape,
});
