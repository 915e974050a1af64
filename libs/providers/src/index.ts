export * from './types';
export * from './mapping';
