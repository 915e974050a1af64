/**
 * The origin (`https://host[:port]`) of an endpoint override such as HMS_ENDPOINT: an https URL
 * with no path (a trailing slash tolerated), query, fragment or user info. Anything else throws,
 * naming `name`: a provider client given it is misconfigured.
 */
export function httpsOrigin(value: string, name: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`${name} ${value} is not a URL`);
  }
  if (url.protocol !== 'https:' || (url.pathname !== '/' && url.pathname !== '') || url.search || url.hash || url.username || url.password) {
    throw new Error(`${name} must be an https origin (https://host[:port]), not ${value}`);
  }
  return url.origin;
}
