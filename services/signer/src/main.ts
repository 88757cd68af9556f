import { runDataService } from '@custos/events';
import { configShape } from './config.js';
import { SCHEMA } from './db/schema.js';

// Chains, signing keys, transactions and intents. Its RPCs are added by the issues that build them.
runDataService({
  name: 'signer',
  schema: SCHEMA,
  configShape,
});
