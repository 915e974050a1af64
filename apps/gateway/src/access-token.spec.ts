import { createHmac } from 'node:crypto';
import { issueAccessToken, keyId, verifyAccessToken } from './access-token';

const OLD_KEY = 'old-signing-key-0123456789abcdefghij';
const NEW_KEY = 'new-signing-key-0123456789abcdefghij';
const NOW = 1_750_000_000;
const at = (seconds: number) => () => seconds;

const decode = (segment: string) => JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
/** A token signed with `key` over the given header and claims, as an attacker holding the key could make. */
const forge = (key: string, header: object, claims: object) => {
  const signed = `${encode(header)}.${encode(claims)}`;
  return `${signed}.${createHmac('sha256', key).update(signed).digest('base64url')}`;
};

describe('access tokens', () => {
  it('is a compact HS256 JWT naming its key, client, issue time and expiry', () => {
    const token = issueAccessToken(NEW_KEY, 'crm-client', 7200, at(NOW));
    const [header, claims, signature] = token.split('.');
    expect(decode(header)).toEqual({ alg: 'HS256', typ: 'JWT', kid: keyId(NEW_KEY) });
    expect(decode(claims)).toEqual({ sub: 'crm-client', iat: NOW, exp: NOW + 7200 });
    expect(signature).toBe(createHmac('sha256', NEW_KEY).update(`${header}.${claims}`).digest('base64url'));
    expect(token).not.toContain(NEW_KEY);
    expect(keyId(NEW_KEY)).not.toBe(keyId(OLD_KEY));
  });

  it('verifies until its expiry, and not from then on', () => {
    const token = issueAccessToken(NEW_KEY, 'crm-client', 60, at(NOW));
    expect(verifyAccessToken([NEW_KEY], token, at(NOW))).toEqual({ ok: true, claims: { sub: 'crm-client', iat: NOW, exp: NOW + 60 } });
    expect(verifyAccessToken([NEW_KEY], token, at(NOW + 59)).ok).toBe(true);
    expect(verifyAccessToken([NEW_KEY], token, at(NOW + 60))).toEqual({ ok: false, error: 'expired' });
    expect(verifyAccessToken([NEW_KEY], token, at(NOW + 86400))).toEqual({ ok: false, error: 'expired' });
  });

  it('verifies with any listed key: a token of the old key passes while it is listed second, and fails once it is removed', () => {
    const old = issueAccessToken(OLD_KEY, 'crm-client', 7200, at(NOW));
    expect(verifyAccessToken([NEW_KEY, OLD_KEY], old, at(NOW)).ok).toBe(true);
    expect(verifyAccessToken([NEW_KEY], old, at(NOW))).toEqual({ ok: false, error: 'unknown key' });
  });

  it('refuses a token whose claims were changed', () => {
    const [header, , signature] = issueAccessToken(NEW_KEY, 'crm-client', 60, at(NOW)).split('.');
    const longer = `${header}.${encode({ sub: 'crm-client', iat: NOW, exp: NOW + 10 ** 9 })}.${signature}`;
    const other = `${header}.${encode({ sub: 'another-client', iat: NOW, exp: NOW + 60 })}.${signature}`;
    for (const token of [longer, other]) expect(verifyAccessToken([NEW_KEY], token, at(NOW))).toEqual({ ok: false, error: 'bad signature' });
  });

  it('refuses a changed or cut signature', () => {
    const token = issueAccessToken(NEW_KEY, 'crm-client', 60, at(NOW));
    const last = token.at(-2) === 'A' ? 'B' : 'A';
    expect(verifyAccessToken([NEW_KEY], `${token.slice(0, -2)}${last}${token.at(-1)}`, at(NOW))).toEqual({ ok: false, error: 'bad signature' });
    expect(verifyAccessToken([NEW_KEY], token.slice(0, -4), at(NOW))).toEqual({ ok: false, error: 'bad signature' });
  });

  it('refuses a token signed with a key that only claims the id of a listed one', () => {
    const token = forge('an-attackers-key-0123456789abcdefghij', { alg: 'HS256', kid: keyId(NEW_KEY) }, { sub: 'crm-client', iat: NOW, exp: NOW + 60 });
    expect(verifyAccessToken([NEW_KEY], token, at(NOW))).toEqual({ ok: false, error: 'bad signature' });
  });

  it('refuses another algorithm, even "none" with no signature', () => {
    const claims = encode({ sub: 'crm-client', iat: NOW, exp: NOW + 60 });
    expect(verifyAccessToken([NEW_KEY], `${encode({ alg: 'none', kid: keyId(NEW_KEY) })}.${claims}.`, at(NOW))).toEqual({ ok: false, error: 'malformed' });
    expect(verifyAccessToken([NEW_KEY], forge(NEW_KEY, { alg: 'HS512', kid: keyId(NEW_KEY) }, { sub: 'x', iat: NOW, exp: NOW + 60 }), at(NOW))).toEqual({
      ok: false,
      error: 'malformed',
    });
  });

  it('refuses well-signed claims of the wrong shape', () => {
    const header = { alg: 'HS256', kid: keyId(NEW_KEY) };
    for (const claims of [{ iat: NOW, exp: NOW + 60 }, { sub: 'x', iat: NOW, exp: String(NOW + 60) }, { sub: 42, iat: NOW, exp: NOW + 60 }]) {
      expect(verifyAccessToken([NEW_KEY], forge(NEW_KEY, header, claims), at(NOW))).toEqual({ ok: false, error: 'malformed' });
    }
  });

  it.each(['', 'garbage', 'a.b', 'a.b.c.d', 'a.b.c', '!!!.???.***', `${encode(['HS256'])}.${encode({})}.sig`, 'e30.e30.e30'])('refuses %p as malformed', (token) => {
    expect(verifyAccessToken([NEW_KEY], token, at(NOW))).toEqual({ ok: false, error: 'malformed' });
  });
});
