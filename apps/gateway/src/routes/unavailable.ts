import { isDbUnavailable } from '@operator/db';
import { UnavailableError } from '@operator/push';

/** Database outages become 503 (the client retries); anything else stays an error of ours. */
export async function orUnavailable<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (isDbUnavailable(error)) throw new UnavailableError('store is unavailable, retry later', { cause: error });
    throw error;
  }
}
