export * from './env';
export * from './config';
export * from './push';
export * from './logger';
