import { loadGatewayConfig } from './config';
import { configErrorOf } from './test/config-error';

// The gateway's edge: the failed authentication limit.

describe('loadGatewayConfig: failed authentications', () => {
  it('locks out after 20 failures in 5 minutes by default', () => {
    expect(loadGatewayConfig({}).edge.authFailures).toEqual({ limit: 20, windowMs: 5 * 60000 });
  });

  it('reads the limit, and its window as a duration', () => {
    expect(loadGatewayConfig({ AUTH_FAILURE_LIMIT: '5', AUTH_FAILURE_WINDOW: '90s' }).edge.authFailures).toEqual({ limit: 5, windowMs: 90000 });
    expect(loadGatewayConfig({ AUTH_FAILURE_LIMIT: '0' }).edge.authFailures.limit).toBe(0);
  });

  it('refuses a negative limit, a window of zero, and a window that is not a duration', () => {
    expect(configErrorOf(() => loadGatewayConfig({ AUTH_FAILURE_LIMIT: '-1' })).problems).toEqual([expect.stringMatching(/^AUTH_FAILURE_LIMIT /)]);
    expect(configErrorOf(() => loadGatewayConfig({ AUTH_FAILURE_WINDOW: '0m' })).problems).toEqual(['AUTH_FAILURE_WINDOW must be longer than 0']);
    expect(configErrorOf(() => loadGatewayConfig({ AUTH_FAILURE_WINDOW: '5 minutes' })).problems).toEqual([expect.stringMatching(/^AUTH_FAILURE_WINDOW /)]);
  });
});
