import path from 'node:path';
import { runDataService } from '@custos/events';
import { configShape } from './config.js';
import { SCHEMA } from './db/schema.js';

// Webhooks and signed event delivery. Its RPCs are added by the issues that build them.
runDataService({
  name: 'webhook-dispatcher',
  schema: SCHEMA,
  migrationsFolder: path.join(__dirname, '..', 'migrations'),
  configShape,
});
