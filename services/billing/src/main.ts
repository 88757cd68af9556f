import path from 'node:path';
import { runDataService } from '@custos/events';
import { configShape } from './config.js';
import { SCHEMA } from './db/schema.js';

// Plans, tier caps, usage and payments. Its RPCs are added by the issues that build them.
runDataService({
  name: 'billing',
  schema: SCHEMA,
  migrationsFolder: path.join(__dirname, '..', 'migrations'),
  configShape,
});
