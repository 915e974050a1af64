export * from './jobs';
export * from './redis';
export * from './push-queues';
export * from './send-worker';
export * from './board';
export * from './pubsub';
