import { urlOrigin } from './logger';

describe('urlOrigin', () => {
  it('keeps the scheme, the host and a port that is not the default, and drops the rest', () => {
    expect(urlOrigin('https://crm:s3cret@crm.example.com:8443/hooks/push?token=t0ken#x')).toBe('https://crm.example.com:8443');
    expect(urlOrigin('https://crm.example.com:443/v1/')).toBe('https://crm.example.com');
    expect(urlOrigin('http://user@[::1]:8080/')).toBe('http://[::1]:8080');
  });

  it('does the same for the stores and brokers, whose URLs JavaScript gives no origin', () => {
    expect(urlOrigin('amqps://operator:s3cret@broker.crm.example:5671/crm-vhost')).toBe('amqps://broker.crm.example:5671');
    expect(urlOrigin('postgresql://operator:s3cret@pgbouncer:5432/operator_api?sslmode=require')).toBe('postgresql://pgbouncer:5432');
    expect(urlOrigin('rediss://default:s3cret@redis.internal:6380/2')).toBe('rediss://redis.internal:6380');
    expect(urlOrigin('http://proxy-user:s3cret@proxy.internal:3128')).toBe('http://proxy.internal:3128');
  });

  it('gives null for an empty setting, and never the text of one that is not a URL with a host', () => {
    expect(urlOrigin('')).toBeNull();
    expect(urlOrigin(undefined)).toBeNull();
    for (const text of ['user:s3cret@host', 's3cret', 'mailto:s3cret@example.com']) {
      expect(urlOrigin(text)).toBe('(not a URL with a host)');
    }
  });
});
