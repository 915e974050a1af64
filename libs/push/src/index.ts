export * from './errors';
export * from './accept';
export * from './single-group';
export * from './send';
export * from './outcomes';
export * from './reconcile';
export * from './worker';
export * from './tracking';
