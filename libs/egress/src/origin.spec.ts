import { httpsOrigin } from './origin';

describe('httpsOrigin', () => {
  it('answers the origin of an https URL without a path', () => {
    expect(httpsOrigin('https://127.0.0.1:8443', 'HMS_ENDPOINT')).toBe('https://127.0.0.1:8443');
    expect(httpsOrigin('https://Push.Example.test/', 'HMS_ENDPOINT')).toBe('https://push.example.test');
  });

  it.each([
    ['http://127.0.0.1:8080', 'must be an https origin'],
    ['https://api.example.test/v1', 'must be an https origin'],
    ['https://api.example.test/?x=1', 'must be an https origin'],
    ['https://user:pw@api.example.test', 'must be an https origin'],
    ['api.example.test', 'is not a URL'],
  ])('refuses %s, naming the setting', (value, message) => {
    expect(() => httpsOrigin(value, 'ONESIGNAL_ENDPOINT')).toThrow(`ONESIGNAL_ENDPOINT`);
    expect(() => httpsOrigin(value, 'ONESIGNAL_ENDPOINT')).toThrow(message);
  });
});
