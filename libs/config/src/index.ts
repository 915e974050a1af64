export * from './env';
export * from './config';
