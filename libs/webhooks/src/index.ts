export * from './body';
export * from './signature';
export * from './dispatcher';
