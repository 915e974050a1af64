import net from 'node:net';
import { Type } from '@sinclair/typebox';
import type { Env } from './env';

// WEBPUSH_ALLOWED_ORIGINS: the push services a subscription may point at, checked at registration
// and again by the worker (the list may have changed since).

/** The public browser push services: Chrome/Edge/Opera (FCM), Firefox, Safari, Windows. */
export const DEFAULT_WEBPUSH_ALLOWED_ORIGINS = 'https://fcm.googleapis.com,https://updates.push.services.mozilla.com,https://web.push.apple.com,https://*.notify.windows.com';

export const WebPushOriginsEnv = Type.Object({
  WEBPUSH_ALLOWED_ORIGINS: Type.String({
    default: DEFAULT_WEBPUSH_ALLOWED_ORIGINS,
    description: 'Comma-separated https origins (https://host[:port], https://*.domain) a Web Push subscription endpoint may point at',
  }),
});

export interface AllowedOrigin {
  /** As written, for messages. */
  text: string;
  /** Lower-case host without brackets; for a wildcard, the part after `*.`. */
  host: string;
  /** `*.host`: any subdomain of host (not host itself). */
  wildcard: boolean;
  port: number;
  /** Named by a private address or `localhost`: the worker may connect to such addresses for it alone. */
  privateAllowed: boolean;
}

const HOST_LABEL = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

function isPlainHost(host: string): boolean {
  return net.isIP(host) !== 0 || host.split('.').every((label) => HOST_LABEL.test(label));
}

/** The host as the endpoint writes it (between `//` and port, path, query or fragment), lower-cased, IPv6 bracketed. */
function writtenHost(endpoint: string): string {
  const authority = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)/i.exec(endpoint)?.[1] ?? '';
  const host = authority.startsWith('[') ? authority.slice(0, authority.indexOf(']') + 1) : authority.replace(/:[^:]*$/, '');
  return host.toLowerCase();
}

function isPrivateName(host: string): boolean {
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  // An IP literal names its own address: listing it is listing that address, whatever range it is in.
  return net.isIP(host) !== 0;
}

function parseEntry(entry: string): AllowedOrigin | string {
  const wildcard = /^https:\/\/\*\./i.test(entry);
  let url: URL;
  try {
    url = new URL(wildcard ? entry.replace(/^https:\/\/\*\./i, 'https://wildcard.') : entry);
  } catch {
    return `"${entry}" is not an origin (https://host[:port])`;
  }
  if (url.protocol !== 'https:') return `"${entry}" is not https`;
  if (url.username || url.password) return `"${entry}" has user info`;
  if ((url.pathname !== '/' && url.pathname !== '') || url.search || url.hash || /^https:\/\/[^/]+\/./i.test(entry)) return `"${entry}" has a path; give the origin only`;
  let host = url.hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  if (!wildcard && !isPlainHost(host)) return `"${entry}": the host must be a domain name or an IP address`;
  if (wildcard) {
    host = host.replace(/^wildcard\./, '');
    if (net.isIP(host) || !host.includes('.') || !host.split('.').every((label) => HOST_LABEL.test(label))) return `"${entry}": a wildcard needs a domain of at least two labels after "*."`;
  }
  return { text: entry, host, wildcard, port: Number(url.port || 443), privateAllowed: !wildcard && isPrivateName(host) };
}

export function parseAllowedOrigins(text: string): { ok: true; origins: AllowedOrigin[] } | { ok: false; problems: string[] } {
  const entries = text
    .split(',')
    .map((entry) => entry.trim().replace(/\/$/, ''))
    .filter(Boolean);
  const origins: AllowedOrigin[] = [];
  const problems: string[] = [];
  for (const entry of entries) {
    const parsed = parseEntry(entry);
    if (typeof parsed === 'string') problems.push(parsed);
    else origins.push(parsed);
  }
  if (!problems.length && !origins.length) problems.push('lists no origin');
  return problems.length ? { ok: false, problems } : { ok: true, origins };
}

/**
 * The entry an endpoint falls under, or why none. The host must read the same to every URL parser
 * (web-push uses the legacy `url.parse`), so it must be written as WHATWG gives it back.
 */
export function matchAllowedOrigin(endpoint: string, origins: readonly AllowedOrigin[]): { ok: true; origin: AllowedOrigin } | { ok: false; reason: string } {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return { ok: false, reason: 'is not a URL' };
  }
  if (url.protocol !== 'https:') return { ok: false, reason: `must be https (got ${url.protocol.replace(/:$/, '')})` };
  const written = writtenHost(endpoint);
  if (url.username || url.password || written.includes('@')) return { ok: false, reason: 'must not carry user info' };
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  if (written !== url.hostname || !isPlainHost(host)) return { ok: false, reason: `host ${JSON.stringify(written)} is not written as a plain domain name or IP address` };
  const port = Number(url.port || 443);
  for (const origin of origins) {
    const named = origin.wildcard ? host.endsWith(`.${origin.host}`) : host === origin.host;
    if (named && port === origin.port) return { ok: true, origin };
  }
  return { ok: false, reason: `origin ${url.protocol}//${url.host} is not in WEBPUSH_ALLOWED_ORIGINS` };
}

export function webpushAllowedOriginsOf(env: Env): { origins: AllowedOrigin[]; problems: string[] } {
  const parsed = parseAllowedOrigins(env.WEBPUSH_ALLOWED_ORIGINS || DEFAULT_WEBPUSH_ALLOWED_ORIGINS);
  return parsed.ok ? { origins: parsed.origins, problems: [] } : { origins: [], problems: parsed.problems.map((problem) => `WEBPUSH_ALLOWED_ORIGINS: ${problem}`) };
}
