// Which proxy an outbound connection goes through: HTTPS_PROXY for https, HTTP_PROXY for http, none
// for a host NO_PROXY names. NO_PROXY follows curl's and undici's conventions: names (covering
// subdomains), addresses, optional `:port`, or `*`.

/** HTTPS_PROXY, HTTP_PROXY, NO_PROXY as libs/config reads them. */
export interface ProxySettings {
  httpsProxy?: string;
  httpProxy?: string;
  noProxy?: string;
}

interface NoProxyEntry {
  host: string;
  port: number | null;
}

function noProxyEntries(text: string | undefined): NoProxyEntry[] | 'all' {
  const entries: NoProxyEntry[] = [];
  for (const raw of (text ?? '').split(/[\s,]+/)) {
    const entry = raw.trim().toLowerCase();
    if (!entry) continue;
    if (entry === '*') return 'all';
    const bracketed = entry.match(/^\[([^\]]+)\](?::(\d+))?$/);
    const hostPort = bracketed ? null : entry.match(/^([^:]+):(\d+)$/);
    const host = (bracketed?.[1] ?? hostPort?.[1] ?? entry).replace(/^\*?\./, '');
    const port = bracketed?.[2] ?? hostPort?.[2];
    entries.push({ host, port: port ? Number(port) : null });
  }
  return entries;
}

function defaultPort(protocol: string): number {
  return protocol === 'https:' ? 443 : 80;
}

/** A bare `host:port` is taken as http. */
export function parseProxyUrl(text: string): URL {
  const url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `http://${text}`);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`proxy ${url.protocol}//${url.host} is neither http: nor https:`);
  return url;
}

export function proxyFor(target: URL | string, settings: ProxySettings): URL | null {
  const url = typeof target === 'string' ? new URL(target) : target;
  const proxy = url.protocol === 'https:' || url.protocol === 'wss:' ? settings.httpsProxy : settings.httpProxy;
  if (!proxy) return null;
  const skip = noProxyEntries(settings.noProxy);
  if (skip === 'all') return null;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  const port = Number(url.port || defaultPort(url.protocol));
  const bypassed = skip.some((entry) => (entry.port === null || entry.port === port) && (host === entry.host || host.endsWith(`.${entry.host}`)));
  return bypassed ? null : parseProxyUrl(proxy);
}

export function proxyAuthorization(proxy: URL): string | undefined {
  if (!proxy.username && !proxy.password) return undefined;
  const credentials = `${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`;
  return `Basic ${Buffer.from(credentials).toString('base64')}`;
}

/** A proxy URL fit for logs: no user info. */
export function proxyLabel(proxy: URL): string {
  return `${proxy.protocol}//${proxy.host}`;
}
