import type { OutboundAnswer } from '@operator/egress';
import { resultsOf } from './provider';

const A = '0b6f0c1e-1a2b-4c3d-8e4f-000000000001';
const B = '0b6f0c1e-1a2b-4c3d-8e4f-000000000002';
const NOTIFICATION = 'b98881cc-1e94-4366-bbd9-db8f3429292b';

function answer(status: number, body: unknown, headers: Record<string, string> = {}, truncated = false): OutboundAnswer {
  return { status, headers, body: Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)), truncated };
}

const results = (given: OutboundAnswer) => [...resultsOf(given, [A, B]).values()];

describe('resultsOf: OneSignal answers, per subscription', () => {
  it('takes a notification id as sent for every subscription it does not name as invalid', () => {
    expect(results(answer(200, { id: NOTIFICATION, external_id: null, errors: { invalid_player_ids: [B.toUpperCase()] } }))).toEqual([
      { ok: true, providerMessageId: NOTIFICATION },
      { ok: false, error: expect.objectContaining({ class: 'dead-token', code: 'unregistered' }) },
    ]);
  });

  it('takes "All included players are not subscribed" (no notification made) as dead for all, as a 200 or a 400', () => {
    for (const status of [200, 400]) {
      for (const result of results(answer(status, { id: '', errors: ['All included players are not subscribed'] }))) {
        expect(result).toEqual({ ok: false, error: expect.objectContaining({ class: 'dead-token', code: 'unregistered' }) });
      }
    }
  });

  it('takes a 200 it cannot read (cut, or not JSON) as transient: sending again under the same key is safe', () => {
    for (const given of [answer(200, '{"id":"b98881cc', {}, true), answer(200, '<html>ok</html>')]) {
      expect(results(given)[0]).toEqual({ ok: false, error: expect.objectContaining({ class: 'transient', code: 'unavailable' }) });
    }
  });

  it.each([
    [400, { errors: ['Message Notifications must have English language content'] }, 'payload', 'payload-invalid', undefined],
    [400, { errors: ['app_id not found. You may be missing a Content-Type: application/json header.'] }, 'auth', 'auth', undefined],
    [400, { errors: ['Please include a case-sensitive header of Authorization: Basic with a valid REST API key.'] }, 'auth', 'auth', undefined],
    [401, { errors: ['Access denied.'] }, 'auth', 'auth', undefined],
    [403, { errors: ['Access denied.'] }, 'auth', 'auth', undefined],
    [404, 'Not Found', 'auth', 'auth', undefined],
    [302, '', 'auth', 'auth', undefined],
    [413, '', 'payload', 'payload-too-large', undefined],
    [500, { errors: ['Internal Server Error'] }, 'transient', 'unavailable', undefined],
    [502, '<html>Bad Gateway</html>', 'transient', 'unavailable', undefined],
  ])('classifies HTTP %i %j as %s/%s', (status, body, errorClass, code, scope) => {
    for (const result of results(answer(status, body))) {
      expect(result).toEqual({ ok: false, error: expect.objectContaining({ class: errorClass, code }) });
      expect(result.ok || result.error.scope).toBe(scope);
    }
  });

  it('takes a 429 as the app over its rate: every send with the credential waits for Retry-After', () => {
    const [result] = results(answer(429, { errors: ['API rate limit exceeded.'] }, { 'retry-after': '7' }));
    expect(result).toEqual({ ok: false, error: { class: 'transient', code: 'rate-limited', message: 'HTTP 429: API rate limit exceeded.', retryAfterMs: 7000, scope: 'credential' } });
  });

  it('takes a 5xx with Retry-After as OneSignal saying when it takes requests again', () => {
    const [result] = results(answer(503, { errors: ['Service Unavailable'] }, { 'retry-after': '30' }));
    expect(result).toEqual({ ok: false, error: expect.objectContaining({ code: 'unavailable', retryAfterMs: 30_000, scope: 'credential' }) });
  });

  it('keeps what OneSignal said as a short sanitised reason, never its raw text', () => {
    const [result] = results(answer(400, { errors: [`<script>${'x'.repeat(500)}</script>\u0007`] }));
    expect(result.ok).toBe(false);
    const message = result.ok ? '' : result.error.message;
    expect(message.length).toBeLessThanOrEqual(140);
    expect(message).not.toMatch(/[<>\u0007]/);
  });
});
