export * from './gate';
export * from './create';
