import { parseProxyUrl, proxyAuthorization, proxyFor, proxyLabel } from './proxy';
import { answerReason, sanitizeReason } from './reason';
import { isPublicAddress } from './guard';

describe('proxyFor', () => {
  const settings = { httpsProxy: 'http://proxy.internal:3128', httpProxy: 'proxy.internal:8080', noProxy: 'localhost, .svc.cluster.local,10.0.0.5,crm.example:8443' };

  it.each([
    ['https://fcm.googleapis.com/v1', 'http://proxy.internal:3128/'],
    ['http://crm.example/events', 'http://proxy.internal:8080/'],
    ['https://crm.example/events', 'http://proxy.internal:3128/'],
    ['https://wallet.svc.cluster.local/credit', null],
    ['https://svc.cluster.local/credit', null],
    ['http://localhost:3000/', null],
    ['https://10.0.0.5/', null],
    ['https://crm.example:8443/events', null],
    ['https://notsvc.cluster.local.example/', 'http://proxy.internal:3128/'],
  ])('%s goes through %s', (target, proxy) => {
    expect(proxyFor(target, settings)?.href ?? null).toBe(proxy);
  });

  it('goes direct with no proxy set or NO_PROXY=*', () => {
    expect(proxyFor('https://fcm.googleapis.com', {})).toBeNull();
    expect(proxyFor('https://fcm.googleapis.com', { ...settings, noProxy: '*' })).toBeNull();
  });

  it('sends the user info as Proxy-Authorization and keeps it out of labels', () => {
    const proxy = parseProxyUrl('http://egress%40ops:s3cr%3At@proxy.internal:3128');
    expect(proxyAuthorization(proxy)).toBe(`Basic ${Buffer.from('egress@ops:s3cr:t').toString('base64')}`);
    expect(proxyLabel(proxy)).toBe('http://proxy.internal:3128');
    expect(() => parseProxyUrl('socks5://proxy:1080')).toThrow(/neither http/);
  });
});

describe('isPublicAddress', () => {
  it.each(['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '::1', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '::ffff:169.254.169.254', '224.0.0.1', 'not-an-ip'])(
    'refuses %s',
    (address) => expect(isPublicAddress(address)).toBe(false),
  );
  it.each(['8.8.8.8', '142.250.74.106', '2a00:1450:4001:82b::200a'])('accepts %s', (address) => expect(isPublicAddress(address)).toBe(true));
});

describe('what a peer said, as stored', () => {
  it('keeps the status and a short reason from JSON, never the raw text', () => {
    expect(answerReason(400, '{"reason":"BadDeviceToken"}')).toBe('HTTP 400: BadDeviceToken');
    expect(answerReason(401, JSON.stringify({ error: { message: 'bad <b>key</b>' } }))).toBe('HTTP 401: bad b key /b');
    expect(answerReason(500, '<html>secret-token-123 at /etc/passwd</html>')).toBe('HTTP 500');
    expect(sanitizeReason(`a\u001b[31m${'x'.repeat(500)}`).length).toBeLessThanOrEqual(120);
  });
});
