import path from 'node:path';
import { runDataService } from '@custos/events';
import { configShape } from './config.js';
import { SCHEMA } from './db/schema.js';

// Grants, IP rules and access decisions. Its RPCs are added by the issues that build them.
runDataService({
  name: 'policy',
  schema: SCHEMA,
  migrationsFolder: path.join(__dirname, '..', 'migrations'),
  configShape,
});
