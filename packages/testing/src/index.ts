export * from './smtp-capture.js';
export * from './mesh-certs.js';
