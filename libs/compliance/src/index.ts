export * from './gate';
