import path from 'node:path';
import { runDataService } from '@custos/events';
import { configShape } from './config.js';
import { SCHEMA } from './db/schema.js';

// Users, orgs, agents, keys and token minting. Its RPCs are added by the issues that build them.
runDataService({
  name: 'identity',
  schema: SCHEMA,
  migrationsFolder: path.join(__dirname, '..', 'migrations'),
  configShape,
});
