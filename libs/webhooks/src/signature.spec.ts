import { createHmac } from 'node:crypto';
import { SIGNATURE_HEADER, signatureHeader, signer, verifySignature } from './signature';

const SECRET = 'whsec-unit';
const BODY = '{"event_id":"e1","status":"sent","meta":{ "a" : 1.0 }}';

describe('signatureHeader', () => {
  it('is t=<unix seconds>,v1=<64 hex>, the HMAC-SHA256 of "<t>.<body>"', () => {
    const header = signatureHeader(SECRET, BODY, 1_700_000_000);
    expect(header).toMatch(/^t=1700000000,v1=[0-9a-f]{64}$/);
    const expected = createHmac('sha256', SECRET).update(`1700000000.${BODY}`).digest('hex');
    expect(header).toBe(`t=1700000000,v1=${expected}`);
    expect(SIGNATURE_HEADER).toBe('X-Signature');
  });

  it('uses the current time by default', () => {
    const before = Math.floor(Date.now() / 1000);
    const header = signatureHeader(SECRET, BODY);
    const t = Number(/^t=(\d+),v1=[0-9a-f]{64}$/.exec(header)![1]);
    expect(t).toBeGreaterThanOrEqual(before);
    expect(t).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
  });

  it("signs as signatureHeader with one secret's signer, a secret of any characters or none", () => {
    for (const secret of [SECRET, 'sécret ü 🔑', '']) {
      const sign = signer(secret);
      const expected = createHmac('sha256', secret).update(`1700000000.${BODY}`).digest('hex');
      expect(sign(BODY, 1_700_000_000)).toBe(`t=1700000000,v1=${expected}`);
      expect(sign(BODY, 1_700_000_000)).toBe(signatureHeader(secret, BODY, 1_700_000_000));
    }
  });

  it('differs with the secret, the body and the timestamp', () => {
    const base = signatureHeader(SECRET, BODY, 1_700_000_000);
    expect(signatureHeader('other', BODY, 1_700_000_000)).not.toBe(base);
    expect(signatureHeader(SECRET, `${BODY} `, 1_700_000_000)).not.toBe(base);
    expect(signatureHeader(SECRET, BODY, 1_700_000_001).split('v1=')[1]).not.toBe(base.split('v1=')[1]);
  });
});

describe('verifySignature', () => {
  const now = 1_700_000_000_000;
  const t = now / 1000;
  const header = signatureHeader(SECRET, BODY, t);

  it('accepts the body as signed, with the secret, within the tolerance', () => {
    expect(verifySignature(SECRET, BODY, header, 300, now)).toBe(true);
    expect(verifySignature(SECRET, BODY, header, 300, now + 299_000)).toBe(true);
    expect(verifySignature(SECRET, BODY, header, 300, now - 299_000)).toBe(true);
    expect(verifySignature(SECRET, BODY, header.replace(',', ', '), 300, now)).toBe(true);
  });

  it('refuses another secret', () => {
    expect(verifySignature('wrong-secret', BODY, header, 300, now)).toBe(false);
  });

  it('refuses a tampered body', () => {
    expect(verifySignature(SECRET, BODY.replace('sent', 'clicked'), header, 300, now)).toBe(false);
    expect(verifySignature(SECRET, BODY.replace('1.0', '1'), header, 300, now)).toBe(false);
    expect(verifySignature(SECRET, `${BODY}\n`, header, 300, now)).toBe(false);
  });

  it('refuses a stale (or far future) timestamp, even when the HMAC is right', () => {
    expect(verifySignature(SECRET, BODY, header, 300, now + 301_000)).toBe(false);
    expect(verifySignature(SECRET, BODY, header, 300, now - 301_000)).toBe(false);
    expect(verifySignature(SECRET, BODY, header, 60, now + 61_000)).toBe(false);
  });

  it('refuses a timestamp changed after signing (a replay with a fresh t)', () => {
    const digest = header.split('v1=')[1];
    expect(verifySignature(SECRET, BODY, `t=${t + 10},v1=${digest}`, 300, now)).toBe(false);
  });

  it('refuses malformed headers', () => {
    const digest = header.split('v1=')[1];
    for (const bad of ['', 'garbage', `v1=${digest}`, `t=${t}`, `t=abc,v1=${digest}`, `t=${t},v1=${digest.slice(0, 62)}`, `t=${t},v1=zz`, `t=${t + 0.5},v1=${digest}`]) {
      expect([bad, verifySignature(SECRET, BODY, bad, 300, now)]).toEqual([bad, false]);
    }
  });
});
