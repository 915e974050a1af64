export * from './push';
export * from './device';
export * from './headers';
export * from './validation';
export * from './raw-json';
export * from './ids';
export * from './limits';
export * from './storable';
