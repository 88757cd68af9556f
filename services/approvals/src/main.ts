import { runDataService } from '@custos/events';
import { configShape } from './config.js';
import { SCHEMA } from './db/schema.js';

// Approval requests, decisions and consensus approvals. Its RPCs are added by the issues that build them.
runDataService({
  name: 'approvals',
  schema: SCHEMA,
  configShape,
});
