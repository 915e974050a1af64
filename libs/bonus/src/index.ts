export * from './money';
export * from './catalog';
export * from './events';
export * from './wallet';
export * from './service';
export * from './credit';
export * from './deps';
export * from './brand';
