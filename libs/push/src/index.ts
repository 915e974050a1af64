export * from './errors';
export * from './accept';
export * from './send';
export * from './worker';
export * from './tracking';
