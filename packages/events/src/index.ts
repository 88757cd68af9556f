export * from './catalogue.js';
export * from './config.js';
export * from './consumer.js';
export * from './nats.js';
export * from './outbox.js';
export * from './relay.js';
export * from './tables.js';
export * from './runtime.js';
