import { errorTaxonomy, fcmAnswerError, fcmSendError, type CredentialFailure } from './errors';

const RESPONSE_FACTS = Symbol.for('operator.fcm.responseFacts');

/** An error shaped like firebase-admin's (code + message), optionally with the HTTP facts the provider keeps. */
function adminError(code: string, message = 'said by FCM', facts?: { status: number; retryAfter?: string; fields?: string[] }) {
  const error = Object.assign(new Error(message), { code });
  if (facts) Object.defineProperty(error, RESPONSE_FACTS, { value: { fields: [], ...facts } });
  return error;
}

describe('fcmAnswerError', () => {
  const google = (status: number, googleStatus: string, message: string, details: unknown[] = []) =>
    JSON.stringify({ error: { code: status, message, status: googleStatus, details } });
  const fcmError = (errorCode: string) => ({ '@type': 'type.googleapis.com/google.firebase.fcm.v1.FcmError', errorCode });

  it.each([
    [404, google(404, 'NOT_FOUND', 'Requested entity was not found.', [fcmError('UNREGISTERED')]), 'unregistered'],
    [400, google(400, 'INVALID_ARGUMENT', 'Request contains an invalid argument.', [fcmError('INVALID_ARGUMENT'), { '@type': 'type.googleapis.com/google.rpc.BadRequest', fieldViolations: [{ field: 'message.token' }] }]), 'invalid-token'],
    [400, google(400, 'INVALID_ARGUMENT', "Invalid value at 'message.android.ttl'", [fcmError('INVALID_ARGUMENT')]), 'payload-invalid'],
    [400, google(400, 'INVALID_ARGUMENT', 'Message is too big', [fcmError('INVALID_ARGUMENT')]), 'payload-too-large'],
    [403, google(403, 'PERMISSION_DENIED', 'SenderId mismatch', [fcmError('SENDER_ID_MISMATCH')]), 'auth'],
    [401, google(401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials.'), 'auth'],
    [429, google(429, 'RESOURCE_EXHAUSTED', 'Quota exceeded', [fcmError('QUOTA_EXCEEDED')]), 'rate-limited'],
    [500, google(500, 'INTERNAL', 'Internal error encountered.', [fcmError('INTERNAL')]), 'unavailable'],
    [503, google(503, 'UNAVAILABLE', 'The service is currently unavailable.'), 'unavailable'],
    [502, '<html>Bad Gateway</html>', 'unavailable'],
    [401, 'Unauthorized', 'auth'],
    [400, 'Bad Request', 'payload-invalid'],
  ])('HTTP %d %s -> %s', (status, body, code) => {
    expect(fcmSendError(fcmAnswerError(status, undefined, body)).code).toBe(code);
  });

  it('keeps the status, FCM error code and Retry-After', () => {
    const error = fcmSendError(fcmAnswerError(429, '7', google(429, 'RESOURCE_EXHAUSTED', 'Quota exceeded', [fcmError('QUOTA_EXCEEDED')])));
    expect(error).toEqual({
      class: 'transient',
      code: 'rate-limited',
      message: 'messaging/message-rate-exceeded (HTTP 429 QUOTA_EXCEEDED): Quota exceeded',
      retryAfterMs: 7000,
      scope: 'device',
    });
  });

  describe('whose quota a 429 is about', () => {
    const errorInfo = (metadata: Record<string, string>, reason = 'RATE_LIMIT_EXCEEDED') => ({ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason, domain: 'googleapis.com', metadata });
    const quotaFailure = (...violations: { subject?: string; description?: string }[]) => ({ '@type': 'type.googleapis.com/google.rpc.QuotaFailure', violations });
    const scopeOf = (message: string, details: unknown[], googleStatus = 'RESOURCE_EXHAUSTED') => fcmSendError(fcmAnswerError(429, '30', google(429, googleStatus, message, details))).scope;
    const projectQuota = errorInfo({ quota_limit: 'SendsPerMinutePerProject', quota_unit: '1/min/{project}', consumer: 'projects/123', service: 'fcm.googleapis.com' });

    it("is the credential's for a project over its send quota, as Google answers it", () => {
      const message = "Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute' of service 'fcm.googleapis.com' for consumer 'project_number:123'.";
      expect(fcmSendError(fcmAnswerError(429, '30', google(429, 'RESOURCE_EXHAUSTED', message, [projectQuota])))).toEqual({
        class: 'transient',
        code: 'rate-limited',
        message: expect.stringContaining('HTTP 429 RESOURCE_EXHAUSTED'),
        retryAfterMs: 30_000,
        scope: 'credential',
      });
    });

    it.each([
      ['an ErrorInfo naming a per-project limit', 'Quota exceeded.', [errorInfo({ quota_limit: 'SendsPerMinutePerProject' }, 'QUOTA_EXCEEDED')]],
      ['an ErrorInfo of Google\'s quota system', 'Quota exceeded.', [errorInfo({})]],
      ['a QuotaFailure about the project', 'Quota exceeded.', [fcmError('QUOTA_EXCEEDED'), quotaFailure({ subject: 'project:123', description: 'Message rate exceeded' })]],
      ["Service Control's words alone", "Quota exceeded for quota metric 'Send requests' of service 'fcm.googleapis.com' for consumer 'project_number:123'.", []],
    ])("is the credential's for %s", (_what, message, details) => {
      expect(scopeOf(message, details)).toBe('credential');
    });

    it.each([
      ['a QuotaFailure about the device', [fcmError('QUOTA_EXCEEDED'), quotaFailure({ subject: 'device', description: 'Device message rate exceeded' })]],
      ['a QuotaFailure about a registration token, beside a project ErrorInfo', [projectQuota, quotaFailure({ subject: 'registration_token:abc' })]],
      ['a bare QUOTA_EXCEEDED, which does not say whose', [fcmError('QUOTA_EXCEEDED')]],
      ['a QuotaFailure about something else', [quotaFailure({ subject: 'topic:news' })]],
      ['no details at all', []],
    ])("is the device's for %s", (_what, details) => {
      expect(scopeOf('Quota exceeded.', details)).toBe('device');
    });

    it('leaves the scope out of answers other than 429', () => {
      expect(fcmSendError(fcmAnswerError(503, '30', google(503, 'UNAVAILABLE', 'The service is currently unavailable.', [projectQuota])))).not.toHaveProperty('scope');
    });
  });
});

describe('fcmSendError', () => {
  it.each([
    ['messaging/registration-token-not-registered', 'dead-token', 'unregistered'],
    ['messaging/invalid-registration-token', 'dead-token', 'invalid-token'],
    ['messaging/payload-size-limit-exceeded', 'payload', 'payload-too-large'],
    ['messaging/invalid-payload', 'payload', 'payload-invalid'],
    ['messaging/invalid-package-name', 'payload', 'payload-invalid'],
    ['messaging/message-rate-exceeded', 'transient', 'rate-limited'],
    ['messaging/quota-exceeded', 'transient', 'rate-limited'],
    ['messaging/device-message-rate-exceeded', 'transient', 'rate-limited'],
    ['messaging/server-unavailable', 'transient', 'unavailable'],
    ['messaging/internal-error', 'transient', 'unavailable'],
    ['messaging/unknown-error', 'transient', 'unavailable'],
    ['app/network-error', 'transient', 'network'],
    ['app/network-timeout', 'transient', 'network'],
    ['messaging/authentication-error', 'auth', 'auth'],
    ['messaging/third-party-auth-error', 'auth', 'auth'],
    ['messaging/mismatched-credential', 'auth', 'auth'],
    ['app/invalid-credential', 'auth', 'auth'],
    ['something/new', 'transient', 'unavailable'],
    ['ECONNREFUSED', 'transient', 'network'],
  ])('%s -> %s / %s', (code, errorClass, errorCode) => {
    expect(fcmSendError(adminError(code))).toMatchObject({ class: errorClass, code: errorCode, message: expect.stringContaining('said by FCM') });
  });

  it('tells an INVALID_ARGUMENT about the token from one about the message', () => {
    expect(fcmSendError(adminError('messaging/invalid-argument', 'The registration token is not a valid FCM registration token')).code).toBe('invalid-token');
    expect(fcmSendError(adminError('messaging/invalid-argument', 'Request contains an invalid argument.', { status: 400, fields: ['message.token'] })).code).toBe(
      'invalid-token',
    );
    expect(fcmSendError(adminError('messaging/invalid-argument', "Invalid value at 'message.android.ttl'")).code).toBe('payload-invalid');
    // A named field other than the token wins over the words.
    const packageMismatch = adminError('messaging/invalid-argument', 'Package name does not match the registration token', {
      status: 400,
      fields: ['message.android.restricted_package_name'],
    });
    expect(fcmSendError(packageMismatch).code).toBe('payload-invalid');
    expect(fcmSendError(adminError('messaging/invalid-argument', 'Message is too big')).code).toBe('payload-too-large');
  });

  it('gives retryAfterMs from the response when there was one', () => {
    expect(fcmSendError(adminError('messaging/message-rate-exceeded', 'slow down', { status: 429, retryAfter: '7' }))).toEqual({
      class: 'transient',
      code: 'rate-limited',
      message: 'messaging/message-rate-exceeded (HTTP 429): slow down',
      retryAfterMs: 7000,
      scope: 'device',
    });
    expect(fcmSendError(adminError('messaging/message-rate-exceeded'))).not.toHaveProperty('retryAfterMs');
  });

  it('classes an access token failure by its cause', () => {
    const failed = (failure: CredentialFailure) => fcmSendError(adminError('app/invalid-credential'), failure);
    expect(failed({ status: 400, message: 'invalid_grant' }).class).toBe('auth');
    expect(failed({ status: 401, message: 'invalid_client' }).class).toBe('auth');
    expect(failed({ code: 'ECONNREFUSED', message: 'connect ECONNREFUSED' })).toMatchObject({ class: 'transient', code: 'network' });
    expect(failed({ status: 503, retryAfter: '2', message: 'busy' })).toMatchObject({ code: 'unavailable', retryAfterMs: 2000 });
    expect(failed({ status: 503, message: 'busy' })).not.toHaveProperty('scope');
    // Every send with this service account waits for the same token.
    expect(failed({ status: 429, retryAfter: '2', message: 'slow down' })).toMatchObject({ code: 'rate-limited', retryAfterMs: 2000, scope: 'credential' });
  });
});

describe('errorTaxonomy', () => {
  it("gives the provider's code for each of Google's error codes", () => {
    expect(errorTaxonomy).toMatchObject({
      UNREGISTERED: 'unregistered',
      INVALID_ARGUMENT: 'payload-invalid',
      QUOTA_EXCEEDED: 'rate-limited',
      UNAVAILABLE: 'unavailable',
      INTERNAL: 'unavailable',
      THIRD_PARTY_AUTH_ERROR: 'auth',
      SENDER_ID_MISMATCH: 'auth',
    });
  });

  it('agrees with how an answer carrying each code is classified', () => {
    for (const [code, expected] of Object.entries(errorTaxonomy)) {
      const body = JSON.stringify({ error: { code: 400, message: 'said by FCM', status: code } });
      expect([code, fcmSendError(fcmAnswerError(400, undefined, body)).code]).toEqual([code, expected]);
    }
  });
});
