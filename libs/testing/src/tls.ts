import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Names the local fake provider servers answer for: loopback, and the real providers' hosts. */
export const TEST_SERVER_NAMES = [
  'localhost',
  'fcm.googleapis.com',
  'oauth2.googleapis.com',
  'api.push.apple.com',
  'api.sandbox.push.apple.com',
  'oauth-login.cloud.huawei.com',
  'push-api.cloud.huawei.com',
  'api.onesignal.com',
  'push.example.test',
  '*.push.example.test',
];

export interface TestTls {
  /** PEM of the test certificate authority: trust it, and the servers' certificates verify. */
  ca: string;
  key: string;
  cert: string;
  /** Path of the CA file, for NODE_EXTRA_CA_CERTS in a child process. */
  caFile: string;
}

let cached: TestTls | undefined;

/**
 * A certificate authority and a server certificate made for this test run with openssl (nothing
 * committed): the fake provider servers present the certificate, clients trust the CA.
 */
export function testTls(): TestTls {
  if (cached) return cached;
  const dir = mkdtempSync(join(tmpdir(), 'operator-tls-'));
  const file = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
    '-subj', '/CN=operator test CA', '-keyout', file('ca.key'), '-out', file('ca.pem'),
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', '/CN=localhost',
    '-keyout', file('server.key'), '-out', file('server.csr'));
  const altNames = [...TEST_SERVER_NAMES.map((name) => `DNS:${name}`), 'IP:127.0.0.1', 'IP:::1'].join(',');
  writeFileSync(file('ext.cnf'), `subjectAltName=${altNames}\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n`);
  openssl('x509', '-req', '-in', file('server.csr'), '-CA', file('ca.pem'), '-CAkey', file('ca.key'), '-CAcreateserial',
    '-days', '2', '-extfile', file('ext.cnf'), '-out', file('server.pem'));
  cached = {
    ca: readFileSync(file('ca.pem'), 'utf8'),
    key: readFileSync(file('server.key'), 'utf8'),
    cert: readFileSync(file('server.pem'), 'utf8'),
    caFile: file('ca.pem'),
  };
  return cached;
}
