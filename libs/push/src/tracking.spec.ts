import { v4 as uuidv4, v7 as uuidv7 } from 'uuid';
import { isValidTrackingToken, pushAcceptedAt, trackingToken } from './tracking';

describe('tracking tokens', () => {
  it('are valid for their push only, with their secret only', () => {
    const pushId = uuidv7();
    const token = trackingToken('secret-one-0123456789', pushId);
    expect(isValidTrackingToken('secret-one-0123456789', pushId, token)).toBe(true);
    expect(isValidTrackingToken('secret-two-0123456789', pushId, token)).toBe(false);
    expect(isValidTrackingToken('secret-one-0123456789', uuidv7(), token)).toBe(false);
    expect(isValidTrackingToken('secret-one-0123456789', pushId, undefined)).toBe(false);
  });
});

describe('pushAcceptedAt', () => {
  it('reads the acceptance time a push id carries (a UUIDv7), in either letter case', () => {
    const at = Date.UTC(2026, 0, 2, 3, 4, 5, 678);
    const pushId = uuidv7({ msecs: at });
    expect(pushAcceptedAt(pushId)).toBe(at);
    expect(pushAcceptedAt(pushId.toUpperCase())).toBe(at);
  });

  it('has none for an id that is no UUIDv7', () => {
    expect(pushAcceptedAt(uuidv4())).toBeUndefined();
    expect(pushAcceptedAt('00000000-0000-0000-0000-000000000000')).toBeUndefined();
    expect(pushAcceptedAt('not-a-uuid')).toBeUndefined();
  });
});
