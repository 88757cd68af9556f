export * from './bearer-fns.js';
export * from './cached-jwks.js';
export * from './principal-types.js';
export * from './token-errors.js';
export * from './token-verifier.js';
export * from './revocation.js';
