export * from './tcp-proxy';
export * from './ids';
export * from './factories';
export * from './gateway';
export * from './tls';
export * from './fake-webpush';
export * from './fake-apns';
export * from './fake-fcm';
