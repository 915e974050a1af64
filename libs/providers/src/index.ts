export * from './types';
export * from './descriptor';
export * from './mapping';
export * from './registry';
export * from './sandbox';
export * from './stream-pool';
export * from './access-token';
