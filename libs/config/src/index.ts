export * from './env';
export * from './base';
export * from './config';
export * from './push';
export * from './logger';
export * from './events';
export * from './bonus';
export * from './backoff';
