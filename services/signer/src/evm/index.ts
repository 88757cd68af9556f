// EVM building blocks shared by the transactions API and the sign intents: field parsing, JSON-RPC
// access per chain, gas and fee filling under the agent's caps, building and signing.
export * from './evm-fields.js';
export * from './evm-fill.js';
export * from './evm-rpc.js';
export * from './evm-tx.js';
