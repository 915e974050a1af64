export * from './proxy';
export * from './guard';
export * from './tunnel';
export * from './http';
export * from './reason';
export * from './origin';
export * from './deadline';
export * from './token-request';
