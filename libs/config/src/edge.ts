import net from 'node:net';
import ipaddr from 'ipaddr.js';
import { Type, type Static } from '@sinclair/typebox';
import { splitList } from './env';
import { durationMs } from './events';

// The gateway's public edge: what it believes of, and allows, whoever calls it from outside.

const DURATION = '^\\d+\\s*[smhd]?$';

export const EdgeEnv = Type.Object({
  AUTH_FAILURE_LIMIT: Type.Integer({
    default: 20,
    minimum: 0,
    description:
      'Failed authentications (401) from one address within AUTH_FAILURE_WINDOW past which its wrong credentials are answered 503 with Retry-After; right credentials are always served (0: no limit)',
  }),
  AUTH_FAILURE_WINDOW: Type.String({
    default: '5m',
    pattern: DURATION,
    description: 'The window of AUTH_FAILURE_LIMIT, and how long an address stays throttled after its last failure ("5m", "1h", "300")',
  }),
  AUTH_THROTTLE_EXEMPT: Type.String({
    default: '',
    description: "Comma-separated CIDR ranges (or addresses) whose failed authentications are never counted nor throttled: the CRM's known egress addresses; empty: none",
  }),
  TRUST_PROXY: Type.String({
    default: '',
    description: 'Comma-separated addresses or CIDR ranges of the proxies whose X-Forwarded-For names the client (loopback, linklocal, uniquelocal for those ranges); empty: none',
  }),
  CRM_OAUTH_ALLOW_GET: Type.Boolean({ default: false, description: 'Take GET /oauth/token with the client secret in the query string (405 otherwise)' }),
  TRACKING_TOKEN_TTL: Type.String({ default: '30d', pattern: DURATION, description: "How long after a push is accepted its device may report it with the push's tracking token" }),
});
type EdgeRaw = Static<typeof EdgeEnv>;

export interface EdgeSettings {
  /** Limit 0: never throttled. */
  authFailures: { limit: number; windowMs: number };
  authThrottleExempt: string[];
  /** The proxies whose X-Forwarded-For is believed; none: the client is whoever opened the connection. */
  trustedProxies: string[];
  oauthAllowGet: boolean;
  trackingTokenTtlMs: number;
}

const RANGE_NAMES = ['loopback', 'linklocal', 'uniquelocal'];

/** An address, a CIDR range (`10.0.0.0/8`, `fd00::/8`) or a range's name: what Fastify's trustProxy takes. */
function isProxyEntry(entry: string): boolean {
  if (RANGE_NAMES.includes(entry)) return true;
  const [address, prefix, ...rest] = entry.split('/');
  const family = net.isIP(address);
  if (family === 0 || rest.length) return false;
  return prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128));
}

function isCidr(entry: string): boolean {
  try {
    if (entry.includes('/')) ipaddr.parseCIDR(entry);
    else if (!ipaddr.isValid(entry)) return false;
    return true;
  } catch {
    return false;
  }
}

export function edgeSettings(raw: EdgeRaw): { settings: EdgeSettings; problems: string[] } {
  const problems: string[] = [];
  const windowMs = durationMs(raw.AUTH_FAILURE_WINDOW);
  if (windowMs === 0) problems.push('AUTH_FAILURE_WINDOW must be longer than 0');
  const trustedProxies = splitList(raw.TRUST_PROXY);
  for (const entry of trustedProxies.filter((entry) => !isProxyEntry(entry))) {
    problems.push(`TRUST_PROXY: "${entry}" is not an IP address, a CIDR range (10.0.0.0/8) or one of ${RANGE_NAMES.join(', ')}`);
  }
  const authThrottleExempt = splitList(raw.AUTH_THROTTLE_EXEMPT);
  for (const entry of authThrottleExempt.filter((entry) => !isCidr(entry))) {
    problems.push(`AUTH_THROTTLE_EXEMPT: "${entry}" is not a CIDR range (203.0.113.0/24, 2001:db8::/32) or an IP address`);
  }
  const trackingTokenTtlMs = durationMs(raw.TRACKING_TOKEN_TTL);
  if (trackingTokenTtlMs === 0) problems.push('TRACKING_TOKEN_TTL must be longer than 0');
  return {
    settings: {
      authFailures: { limit: raw.AUTH_FAILURE_LIMIT, windowMs },
      authThrottleExempt,
      trustedProxies,
      oauthAllowGet: raw.CRM_OAUTH_ALLOW_GET,
      trackingTokenTtlMs,
    },
    problems,
  };
}
