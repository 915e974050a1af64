export * from './errors';
export * from './accept';
