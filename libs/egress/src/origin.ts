/** The origin of an endpoint override such as HMS_ENDPOINT; anything with a path, query or user info throws. */
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
