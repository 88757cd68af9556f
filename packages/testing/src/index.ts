export * from './smtp-capture.js';
