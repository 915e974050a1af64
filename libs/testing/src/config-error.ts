import { ConfigError } from '@operator/config';

/** Runs `load` and returns the ConfigError it throws; any other outcome fails the test. */
export function configErrorOf(load: () => unknown): ConfigError {
  try {
    load();
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('expected a ConfigError');
}
