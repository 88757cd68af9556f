import path from 'node:path';
import { runDataService } from '@custos/events';
import { configShape } from './config.js';
import { SCHEMA } from './db/schema.js';

// Chains, signing keys, transactions and intents. Its RPCs are added by the issues that build them.
runDataService({
  name: 'signer',
  schema: SCHEMA,
  migrationsFolder: path.join(__dirname, '..', 'migrations'),
  configShape,
});
