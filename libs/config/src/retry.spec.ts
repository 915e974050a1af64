import { errorReason, isRetriedStatus, parseRetryAfter } from './retry';

describe('isRetriedStatus', () => {
  it('retries timeouts, too early, rate limits and server errors', () => {
    for (const status of [408, 425, 429, 500, 502, 503, 504, 599]) expect([status, isRetriedStatus(status)]).toEqual([status, true]);
  });

  it('does not retry other client errors (they go to the dead letters)', () => {
    for (const status of [400, 401, 403, 404, 405, 409, 410, 413, 415, 422]) expect([status, isRetriedStatus(status)]).toEqual([status, false]);
  });

  it('does not retry successes, redirects or the last 4xx', () => {
    for (const status of [200, 204, 301, 499]) expect([status, isRetriedStatus(status)]).toEqual([status, false]);
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');

  it('reads seconds', () => {
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(parseRetryAfter(2, now)).toBe(2000);
    expect(parseRetryAfter('1.5', now)).toBe(1500);
    expect(parseRetryAfter('0', now)).toBe(0);
  });

  it('reads an HTTP date as the time until it', () => {
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:30 GMT', now)).toBe(30_000);
  });

  it('never answers a negative wait', () => {
    expect(parseRetryAfter('-5', now)).toBe(0);
    expect(parseRetryAfter('Wed, 31 Dec 2025 23:59:00 GMT', now)).toBe(0);
  });

  it('takes the first of repeated headers', () => {
    expect(parseRetryAfter(['3', '60'], now)).toBe(3000);
  });

  it('answers undefined when there is nothing to read', () => {
    for (const value of [undefined, null, '', [], 'soon']) expect(parseRetryAfter(value, now)).toBeUndefined();
  });
});

describe('errorReason', () => {
  it("gives an Error's message", () => {
    expect(errorReason(new Error('socket hang up'))).toBe('socket hang up');
    expect(errorReason(new TypeError(''))).toBe('');
  });

  it('gives anything else as a string', () => {
    expect(errorReason('connection closed')).toBe('connection closed');
    expect(errorReason({ message: 'not an Error' })).toBe('[object Object]');
    expect(errorReason(undefined)).toBe('undefined');
    expect(errorReason(null)).toBe('null');
  });
});
