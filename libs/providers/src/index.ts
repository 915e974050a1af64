export * from './types';
export * from './mapping';
export * from './registry';
export * from './sandbox';
export * from './webpush';
export * from './apns';
export * from './fcm';
