export * from './registry';
export * from './config';
export * from './devices';
