import { hmsOutcome, illegalTokens, type HmsAnswer } from './provider';

const tokens = ['token-a', 'token-b', 'token-c'];
const outcome = (answer: HmsAnswer) => hmsOutcome(answer, tokens);
const errors = (answer: HmsAnswer) => outcome(answer).results.map((result) => (result.ok ? null : result.error));
const first = (answer: HmsAnswer) => errors(answer)[0];

describe('hmsOutcome', () => {
  it('gives every token the request id on success', () => {
    expect(outcome({ status: 200, code: '80000000', msg: 'Success', requestId: '1612' })).toEqual({
      results: tokens.map(() => ({ ok: true, providerMessageId: '1612' })),
      tokenRefused: false,
    });
  });

  it('fails the illegal tokens of a partial success as dead, the others sent', () => {
    const msg = JSON.stringify({ success: 2, failure: 1, illegal_tokens: ['token-b'] });
    const { results } = outcome({ status: 200, code: '80100000', msg, requestId: '1613' });
    expect(results[0]).toEqual({ ok: true, providerMessageId: '1613' });
    expect(results[1]).toEqual({ ok: false, error: { class: 'dead-token', code: 'invalid-token', message: 'Push Kit 80100000: the token is not valid for this app' } });
    expect(results[2]).toEqual({ ok: true, providerMessageId: '1613' });
  });

  it('counts a partial success whose list it cannot read as sent', () => {
    expect(outcome({ status: 200, code: '80100000', msg: 'Partial success', requestId: '9' }).results.every((result) => result.ok)).toBe(true);
  });

  it('fails every token as dead when all are invalid', () => {
    expect(errors({ status: 400, code: '80300007', msg: '{"success":0,"failure":3}' }).map((error) => error?.code)).toEqual(['invalid-token', 'invalid-token', 'invalid-token']);
  });

  it('asks for a renewal when the access token is refused', () => {
    for (const answer of [{ status: 401, code: '80200003', msg: 'Oauth Token expired' }, { status: 401, code: '80200001' }, { status: 401 }, { status: 401, code: '80200099' }]) {
      const got = outcome(answer);
      expect(got.tokenRefused).toBe(true);
      expect(got.results[0]).toMatchObject({ ok: false, error: { class: 'auth', code: 'auth' } });
    }
  });

  it('reads traffic control as the credential rate limited, with Retry-After', () => {
    expect(first({ status: 503, msg: 'Traffic control', retryAfter: '30' })).toEqual({
      class: 'transient',
      code: 'rate-limited',
      message: 'HTTP 503, traffic control: Traffic control',
      retryAfterMs: 30_000,
      scope: 'credential',
    });
    expect(first({ status: 429, code: '80100001' })).toMatchObject({ code: 'rate-limited', scope: 'credential' });
  });

  it('classifies the message errors, the permission error and the internal error', () => {
    expect(first({ status: 400, code: '80300008', msg: 'The message body size exceeds the default value' })).toEqual({
      class: 'payload',
      code: 'payload-too-large',
      message: 'Push Kit 80300008 (HTTP 400): The message body size exceeds the default value',
    });
    for (const code of ['80100001', '80100003', '80100004', '80100013', '80100016', '80300010', '80300011']) {
      expect([code, first({ status: 400, code })?.code]).toEqual([code, 'payload-invalid']);
    }
    expect(first({ status: 403, code: '80300002' })).toMatchObject({ class: 'auth', code: 'auth' });
    expect(first({ status: 500, code: '81000001', msg: 'System internal error' })).toEqual({
      class: 'transient',
      code: 'unavailable',
      message: 'Push Kit 81000001 (HTTP 500): System internal error',
    });
  });

  it('classifies unknown codes by status, keeping the code', () => {
    expect(first({ status: 500, code: '89999999', msg: 'new' })).toMatchObject({ code: 'unavailable', message: 'Push Kit 89999999 (HTTP 500, unknown code): new' });
    expect(first({ status: 400, code: '89999998' })).toMatchObject({ code: 'payload-invalid', message: 'Push Kit 89999998 (HTTP 400, unknown code)' });
    expect(first({ status: 200, code: '89999997' })).toMatchObject({ code: 'payload-invalid' });
    expect(first({ status: 502, body: Buffer.from('<html>bad gateway</html>') })).toMatchObject({ code: 'unavailable', message: "HTTP 502: not an answer of Push Kit's" });
    expect(first({ status: 404 })).toMatchObject({ code: 'auth' });
    expect(first({ status: 413 })).toMatchObject({ code: 'payload-too-large' });
    expect(first({ status: 200, truncated: true })).toMatchObject({ code: 'unavailable', message: "HTTP 200, answer cut: not an answer of Push Kit's" });
  });

  it("never keeps Push Kit's words raw", () => {
    const error = first({ status: 400, code: '80100001', msg: `<script>x</script>\u001b[31m ${'long '.repeat(100)}` })!;
    expect(error.message).not.toMatch(/[<>\u001b]/);
    expect(error.message.length).toBeLessThan(200);
  });
});

describe('illegalTokens', () => {
  it('reads the v1 list and the v3 lists by reason', () => {
    expect(illegalTokens('{"success":1,"failure":2,"illegal_tokens":["a","b"]}')).toEqual(new Set(['a', 'b']));
    expect(illegalTokens('{"illegalTokens":{"noRight":["a"],"tokenFormatError":["c"]},"failure":2}')).toEqual(new Set(['a', 'c']));
    expect(illegalTokens('{"success":1,"failure":0}')).toBeNull();
    expect(illegalTokens('not json')).toBeNull();
  });
});
