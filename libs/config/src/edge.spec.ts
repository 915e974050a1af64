import { loadGatewayConfig } from './config';
import { configErrorOf } from '@operator/testing';

// The gateway's edge: the failed authentication limit, TRUST_PROXY, GET /oauth/token, the
// tracking tokens' lifetime.

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

describe('loadGatewayConfig: AUTH_THROTTLE_EXEMPT', () => {
  it('exempts no address by default, and reads CIDR ranges and addresses', () => {
    expect(loadGatewayConfig({}).edge.authThrottleExempt).toEqual([]);
    expect(loadGatewayConfig({ AUTH_THROTTLE_EXEMPT: ' 203.0.113.0/24, 2001:db8::/32,198.51.100.7 ' }).edge.authThrottleExempt).toEqual(['203.0.113.0/24', '2001:db8::/32', '198.51.100.7']);
  });

  it('refuses at start every entry that is not a CIDR range or an address, naming it', () => {
    const error = configErrorOf(() => loadGatewayConfig({ AUTH_THROTTLE_EXEMPT: '10.0.0.0/33,crm.example.com,10.0.0.0/8,::1/129,10.0.0.0/x' }));
    expect(error.problems).toEqual(
      ['10.0.0.0/33', 'crm.example.com', '::1/129', '10.0.0.0/x'].map((entry) => `AUTH_THROTTLE_EXEMPT: "${entry}" is not a CIDR range (203.0.113.0/24, 2001:db8::/32) or an IP address`),
    );
  });
});

describe('loadGatewayConfig: TRUST_PROXY', () => {
  it('believes no proxy by default', () => {
    expect(loadGatewayConfig({}).edge.trustedProxies).toEqual([]);
  });

  it('reads proxies as addresses, CIDR ranges and range names', () => {
    const config = loadGatewayConfig({ TRUST_PROXY: ' 10.0.0.0/8, 192.168.1.7 ,fd00::/8,::1, loopback,uniquelocal' });
    expect(config.edge.trustedProxies).toEqual(['10.0.0.0/8', '192.168.1.7', 'fd00::/8', '::1', 'loopback', 'uniquelocal']);
  });

  it('names every entry that is not an address or range', () => {
    const error = configErrorOf(() => loadGatewayConfig({ TRUST_PROXY: '10.0.0.0/33,proxy.internal,10.0.0.1/8/8,10.0.0.1,::1/129,10.0.0.0/x' }));
    expect(error.problems).toEqual(
      ['10.0.0.0/33', 'proxy.internal', '10.0.0.1/8/8', '::1/129', '10.0.0.0/x'].map(
        (entry) => `TRUST_PROXY: "${entry}" is not an IP address, a CIDR range (10.0.0.0/8) or one of loopback, linklocal, uniquelocal`,
      ),
    );
  });
});

describe('loadGatewayConfig: CRM_OAUTH_ALLOW_GET', () => {
  it('refuses GET /oauth/token by default, and takes it when asked', () => {
    expect(loadGatewayConfig({}).edge.oauthAllowGet).toBe(false);
    expect(loadGatewayConfig({ CRM_OAUTH_ALLOW_GET: 'true' }).edge.oauthAllowGet).toBe(true);
  });
});

describe('loadGatewayConfig: TRACKING_TOKEN_TTL', () => {
  it('keeps tracking tokens 30 days by default, and reads a duration', () => {
    expect(loadGatewayConfig({}).edge.trackingTokenTtlMs).toBe(30 * 86400000);
    expect(loadGatewayConfig({ TRACKING_TOKEN_TTL: '7d' }).edge.trackingTokenTtlMs).toBe(7 * 86400000);
    expect(loadGatewayConfig({ TRACKING_TOKEN_TTL: '3600' }).edge.trackingTokenTtlMs).toBe(3600000);
  });

  it('refuses zero and what is not a duration', () => {
    expect(configErrorOf(() => loadGatewayConfig({ TRACKING_TOKEN_TTL: '0' })).problems).toEqual(['TRACKING_TOKEN_TTL must be longer than 0']);
    expect(configErrorOf(() => loadGatewayConfig({ TRACKING_TOKEN_TTL: '30 days' })).problems).toEqual([expect.stringMatching(/^TRACKING_TOKEN_TTL /)]);
  });
});
