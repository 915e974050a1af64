export * from './conversion';
export * from './signature';
export * from './poster';
export * from './dispatcher';
export * from './amqp-publisher';
