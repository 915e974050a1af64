export * from './conversion';
export * from './signature';
export * from './dispatcher';
export * from './amqp-publisher';
