import type { SendDeps } from '../send';
import { silent } from './web-push-fixture';

/** What the send specs run processSendJob with: a lease and grace no spec outlives, four messages at once, quiet logs. */
export function specSendDeps(deps: Pick<SendDeps, 'db' | 'provider' | 'providerFor' | 'recorder'> & Partial<SendDeps>): SendDeps {
  return { log: silent, leaseMs: 60000, visibilityGraceMs: 30000, parallelMessages: 4, trackingSecret: 'test-tracking-secret', retryAfterMaxMs: 300000, ...deps };
}
