export { METRICS_CONTENT_TYPE, metricsText, PUBLIC_FAMILIES } from './catalog';
export * from './record';
export * from './store-gauges';
export * from './server';
