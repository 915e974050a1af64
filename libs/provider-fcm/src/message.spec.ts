import { pushRequest } from '@operator/testing';
import { androidPriority, androidTtlMs, fcmWireMessage, isFcmUrl, isHttpsUrl, rgbColor, toFcmMessage } from './message';

describe('toFcmMessage', () => {
  it('builds firebase-admin camelCase fields from the contract spellings', () => {
    const request = pushRequest(1, 'player', {
      image_url: 'https://cdn.example.test/a.png',
      android: { body_loc_key: 'b', body_loc_arcs: ['x'], title_loc_keys: 't', title_loc_args: ['y'], ttl: '60s', priority: 'HIGH', color_rgb: 'abcdef' },
      web: { link: 'https://example.test/go', silent: 'true' },
    });
    const message = toFcmMessage({ pushId: 'push-1', request }, 'token-1');
    expect(message.token).toBe('token-1');
    expect(message.data).toEqual({ push_id: 'push-1' });
    expect(message.notification).toEqual({ title: request.title, body: request.body, imageUrl: 'https://cdn.example.test/a.png' });
    expect(message.android).toEqual({
      priority: 'high',
      ttl: 60_000,
      notification: { bodyLocKey: 'b', bodyLocArgs: ['x'], titleLocKey: 't', titleLocArgs: ['y'], color: '#abcdef', imageUrl: 'https://cdn.example.test/a.png' },
    });
    expect(message.apns?.fcmOptions).toEqual({ imageUrl: 'https://cdn.example.test/a.png' });
    expect(message.apns?.payload?.push_id).toBe('push-1');
    expect(message.webpush?.fcmOptions).toEqual({ link: 'https://example.test/go' });
    expect(message.webpush?.notification).toMatchObject({ title: request.title, body: request.body, silent: true, image: 'https://cdn.example.test/a.png' });
    expect(message.webpush?.data).toEqual({ push_id: 'push-1' });
  });

  it('always carries the three platform blocks, without undefined fields', () => {
    const message = toFcmMessage({ pushId: 'p', request: pushRequest(1, 'player') }, 't');
    expect(Object.keys(message).sort()).toEqual(['android', 'apns', 'data', 'notification', 'token', 'webpush']);
    expect(message.android).toEqual({});
    expect(JSON.stringify(message)).not.toContain('undefined');
    expect(Object.values(message.notification ?? {})).not.toContain(undefined);
  });
});

describe('fcmWireMessage', () => {
  it('renames imageUrl to image and writes ttl as a Duration, leaving the rest as built', () => {
    const request = pushRequest(1, 'player', { image_url: 'https://cdn.example.test/a.png', android: { ttl: '90', collapse_key: 'k', channel_id: 'c' } });
    const message = toFcmMessage({ pushId: 'push-1', request }, 'token-1');
    const wire = JSON.parse(JSON.stringify(fcmWireMessage(message)));
    expect(wire.notification).toEqual({ title: request.title, body: request.body, image: 'https://cdn.example.test/a.png' });
    expect(wire.android).toEqual({ ttl: '90s', collapseKey: 'k', notification: { channelId: 'c', image: 'https://cdn.example.test/a.png' } });
    expect(wire.apns.fcmOptions).toEqual({ image: 'https://cdn.example.test/a.png' });
    expect(wire.apns.payload).toEqual(message.apns?.payload);
    expect(wire.webpush).toEqual(message.webpush);
    expect(wire.token).toBe('token-1');
    expect(message.android?.ttl).toBe(90_000);
  });
});

describe('field helpers', () => {
  it.each([
    ['ff0000', '#ff0000'],
    ['#FF0000', '#ff0000'],
    [' #a1B2c3 ', '#a1b2c3'],
    ['red', undefined],
    ['#fff', undefined],
    ['#ff00000', undefined],
    [undefined, undefined],
  ])('colour %p -> %p', (input, output) => expect(rgbColor(input)).toBe(output));

  it.each([
    ['high', 'high'],
    [' Normal ', 'normal'],
    ['urgent', undefined],
    [undefined, undefined],
  ])('priority %p -> %p', (input, output) => expect(androidPriority(input)).toBe(output));

  it.each([
    ['3600', 3_600_000],
    ['3600s', 3_600_000],
    ['1h', 3_600_000],
    ['0', 0],
    ['60d', 28 * 24 * 3600 * 1000],
    ['soon', undefined],
  ])('ttl %p -> %p ms', (input, output) => expect(androidTtlMs(input)).toBe(output));

  it('accepts only the URLs firebase-admin and FCM accept', () => {
    expect(isFcmUrl('https://cdn.example.test/a/b.png?x=1')).toBe(true);
    expect(isFcmUrl('http://cdn.example.test/a.png')).toBe(true);
    expect(isFcmUrl('ftp://cdn.example.test/a.png')).toBe(false);
    expect(isFcmUrl('not a url')).toBe(false);
    expect(isHttpsUrl('https://example.test/')).toBe(true);
    expect(isHttpsUrl('http://example.test/')).toBe(false);
    expect(isHttpsUrl('/relative')).toBe(false);
  });
});
