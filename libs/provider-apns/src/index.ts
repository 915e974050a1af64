export { apnsError, createApnsProvider, type ApnsProviderOptions } from './provider';
