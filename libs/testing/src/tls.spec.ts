import https from 'node:https';
import { testTls } from './tls';

describe('testTls', () => {
  it('makes a server certificate that verifies against the test CA for loopback and provider names', async () => {
    const tls = testTls();
    const server = https.createServer({ key: tls.key, cert: tls.cert }, (_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    const get = (servername: string) =>
      new Promise<string>((resolve, reject) => {
        https
          .get({ host: '127.0.0.1', port, servername, headers: { host: servername }, ca: tls.ca }, (res) => {
            let body = '';
            res.on('data', (chunk) => (body += chunk));
            res.on('end', () => resolve(body));
          })
          .on('error', reject);
      });
    try {
      expect(await get('fcm.googleapis.com')).toBe('ok');
      expect(await get('api.push.apple.com')).toBe('ok');
      await expect(
        new Promise((resolve, reject) => https.get({ host: '127.0.0.1', port, servername: 'localhost' }, resolve).on('error', reject)),
      ).rejects.toThrow(/self-signed|unable to verify|certificate/);
    } finally {
      server.close();
    }
  });
});
