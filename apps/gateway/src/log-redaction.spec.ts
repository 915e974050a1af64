import type { FastifyRequest } from 'fastify';
import { loggedRequest, redactedUrl } from './log-redaction';

describe('request URLs in the logs', () => {
  it.each([
    ['/oauth/token?grant_type=client_credentials&client_id=crm&client_secret=s3cret', '/oauth/token?grant_type=client_credentials&client_id=crm&client_secret=[Redacted]'],
    ['/oauth/token?client_secret=s3cret&client_id=crm', '/oauth/token?client_secret=[Redacted]&client_id=crm'],
    ['/oauth/token?client%5Fsecret=s3cret', '/oauth/token?client%5Fsecret=[Redacted]'],
    ['/x?access_token=abc.def.ghi#top', '/x?access_token=[Redacted]#top'],
    ['/channels/push/status?push_id=1&push_id=2', '/channels/push/status?push_id=1&push_id=2'],
    ['/oauth/token?my_client_secret=kept', '/oauth/token?my_client_secret=kept'],
    ['/oauth/token?client_secret=%zz&x=1', '/oauth/token?client_secret=[Redacted]&x=1'],
  ])('%s is logged as %s', (url, logged) => {
    expect(redactedUrl(url)).toBe(logged);
  });

  it('serializes what is logged as req even when it is no request', () => {
    expect(loggedRequest({ headers: { 'x-api-key': 'secret' } } as unknown as FastifyRequest)).toEqual({
      method: undefined,
      url: undefined,
      host: undefined,
      remoteAddress: undefined,
      remotePort: undefined,
    });
  });
});
