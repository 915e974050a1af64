import { DEFAULT_WEBPUSH_ALLOWED_ORIGINS, matchAllowedOrigin, parseAllowedOrigins, type AllowedOrigin } from './origins';

function list(text: string): AllowedOrigin[] {
  const parsed = parseAllowedOrigins(text);
  if (!parsed.ok) throw new Error(parsed.problems.join('; '));
  return parsed.origins;
}

describe('WEBPUSH_ALLOWED_ORIGINS', () => {
  const origins = list(`${DEFAULT_WEBPUSH_ALLOWED_ORIGINS},https://127.0.0.1:9443,https://localhost:8443`);

  it.each([
    ['https://fcm.googleapis.com/fcm/send/abc', 'https://fcm.googleapis.com'],
    ['https://FCM.googleapis.com:443/fcm/send/abc', 'https://fcm.googleapis.com'],
    ['https://wns2-db5p.notify.windows.com/w/?token=x', 'https://*.notify.windows.com'],
    ['https://127.0.0.1:9443/push/1', 'https://127.0.0.1:9443'],
    ['https://localhost:8443/push/1?a=b#c', 'https://localhost:8443'],
  ])('allows %s under %s', (endpoint, entry) => {
    const match = matchAllowedOrigin(endpoint, origins);
    expect(match.ok && match.origin.text).toBe(entry);
  });

  it.each([
    ['https://notify.windows.com/w', 'is not in WEBPUSH_ALLOWED_ORIGINS'],
    ['https://fcm.googleapis.com:444/x', 'is not in WEBPUSH_ALLOWED_ORIGINS'],
    ['https://fcm.googleapis.com.evil.example/x', 'is not in WEBPUSH_ALLOWED_ORIGINS'],
    ['http://fcm.googleapis.com/x', 'must be https'],
    ['https://u:p@fcm.googleapis.com/x', 'user info'],
    ['https://169.254.169.254/latest/meta-data', 'is not in WEBPUSH_ALLOWED_ORIGINS'],
    ['https://127.0.0.1:6379/', 'is not in WEBPUSH_ALLOWED_ORIGINS'],
    ['not a url', 'is not a URL'],
    ['https://@fcm.googleapis.com/x', 'user info'],
    // Hosts Node's url.parse (web-push's parser) reads otherwise than the WHATWG parser.
    ['https://169.254.169.254;x.notify.windows.com/w', 'is not written as a plain domain name'],
    ['https://fcm%2egoogleapis.com/x', 'is not written as a plain domain name'],
    ['https://ｆcm.googleapis.com/x', 'is not written as a plain domain name'],
    ['https://127.1:9443/push/1', 'is not written as a plain domain name'],
    ['https://a_b.notify.windows.com/w', 'is not written as a plain domain name'],
    ['https:fcm.googleapis.com/x', 'is not written as a plain domain name'],
    ['https:///fcm.googleapis.com/x', 'is not written as a plain domain name'],
    ['https://fcm.googleapis.com\t.evil.example/x', 'is not written as a plain domain name'],
  ])('refuses %s', (endpoint, reason) => {
    const match = matchAllowedOrigin(endpoint, origins);
    expect(match.ok).toBe(false);
    expect(!match.ok && match.reason).toContain(reason);
  });

  it('lets only origins named by a private address or localhost reach private addresses', () => {
    expect(origins.filter((origin) => origin.privateAllowed).map((origin) => origin.text)).toEqual(['https://127.0.0.1:9443', 'https://localhost:8443']);
  });

  it('lists every malformed entry', () => {
    const parsed = parseAllowedOrigins('http://x.example, https://*.com, https://a.example/path, https://u@a.example, https://a_b.example,');
    expect(parsed.ok).toBe(false);
    expect(!parsed.ok && parsed.problems).toHaveLength(5);
    expect(parseAllowedOrigins(' , ').ok).toBe(false);
  });
});
