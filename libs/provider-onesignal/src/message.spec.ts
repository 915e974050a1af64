import { pushRequest } from '@operator/testing';
import { androidChannel, androidSound, argbColor, createNotificationBody, oneSignalPriority, oneSignalTtl, ONESIGNAL_MAX_TTL_SECONDS, toOneSignalContent } from './message';

const CHANNEL_UUID = '2c8f1c9e-6a0b-4f0e-9d3a-7b1e5c4d2f10';

describe('toOneSignalContent', () => {
  it('puts every contract field where OneSignal reads it', () => {
    const request = pushRequest(1, 'player', {
      title: 'Weekend reload',
      body: 'Your 50 free spins are waiting',
      image_url: 'https://cdn.example.test/spins.png',
      android: {
        priority: 'high',
        ttl: '2h',
        collapse_key: 'weekend',
        icon: 'ic_promo',
        color_rgb: '#ff8800',
        sound: 'coins.wav',
        tag: 'promo-tag',
        click_action: 'OPEN_PROMO',
        channel_id: 'promotions',
      },
      ios: { badge: '3', category: 'PROMO', thread_id: 'weekend', sub_title: 'Only today', loc_key: 'promo_body', loc_args: ['50'] },
      web: { icon: 'https://cdn.example.test/icon.png', badge: 'https://cdn.example.test/badge.png', link: 'https://casino.example.test/promo', tag: 'promo-web' },
    });

    expect(toOneSignalContent({ pushId: 'push-1', request, trackingToken: 'tt-1' })).toEqual({
      contents: { en: 'Your 50 free spins are waiting' },
      headings: { en: 'Weekend reload' },
      subtitle: { en: 'Only today' },
      data: { push_id: 'push-1', tracking_token: 'tt-1' },
      big_picture: 'https://cdn.example.test/spins.png',
      ios_attachments: { image: 'https://cdn.example.test/spins.png' },
      chrome_web_image: 'https://cdn.example.test/spins.png',
      existing_android_channel_id: 'promotions',
      priority: 10,
      ttl: 7200,
      collapse_id: 'weekend',
      android_accent_color: 'FFFF8800',
      small_icon: 'ic_promo',
      android_sound: 'coins',
      chrome_web_icon: 'https://cdn.example.test/icon.png',
      chrome_web_badge: 'https://cdn.example.test/badge.png',
      web_url: 'https://casino.example.test/promo',
      web_push_topic: 'promo-web',
      ios_badgeType: 'SetTo',
      ios_badgeCount: 3,
      ios_category: 'PROMO',
      thread_id: 'weekend',
      apns_alert: { 'loc-key': 'promo_body', 'loc-args': ['50'] },
    });
  });

  it('sends the text, push_id and nothing else for a bare push', () => {
    const request = pushRequest(1, 'player');
    expect(toOneSignalContent({ pushId: 'p', request })).toEqual({ contents: { en: request.body }, headings: { en: request.title }, data: { push_id: 'p' } });
  });

  it('leaves out what OneSignal would refuse or a device could not use, rather than losing the push', () => {
    const request = pushRequest(1, 'player', {
      title: '',
      image_url: 'ftp://cdn.example.test/a.png',
      android: { priority: 'urgent', ttl: 'soon', color_rgb: 'red', collapse_key: 'k'.repeat(65), sound: 'default' },
      ios: { badge: 'many', loc_args: ['without a key'] },
      web: { icon: 'javascript:alert(1)', link: 'http://casino.example.test/promo' },
    });
    expect(toOneSignalContent({ pushId: 'p', request })).toEqual({ contents: { en: request.body }, data: { push_id: 'p' } });
  });

  it('falls back on android.tag for collapse_id, which replaces a shown notification as FCM tag does', () => {
    const request = pushRequest(1, 'player', { android: { tag: 'promo' } });
    expect(toOneSignalContent({ pushId: 'p', request }).collapse_id).toBe('promo');
  });
});

describe('field conversions', () => {
  it('maps priority to 10 (high) and 5 (normal)', () => {
    expect([oneSignalPriority('high'), oneSignalPriority(' Normal '), oneSignalPriority('max'), oneSignalPriority(undefined)]).toEqual([10, 5, undefined, undefined]);
  });

  it('writes colours as opaque ARGB', () => {
    expect([argbColor('00ff7f'), argbColor('#ABCDEF'), argbColor('#abc'), argbColor(undefined)]).toEqual(['FF00FF7F', 'FFABCDEF', undefined, undefined]);
  });

  it('reads TTLs in seconds, cut to 28 days', () => {
    expect([oneSignalTtl('90'), oneSignalTtl('90m'), oneSignalTtl('60d'), oneSignalTtl('x')]).toEqual([90, 5400, ONESIGNAL_MAX_TTL_SECONDS, undefined]);
  });

  it('sends a dashboard category (UUID) as android_channel_id and an app channel as existing_android_channel_id', () => {
    expect(androidChannel(CHANNEL_UUID)).toEqual({ android_channel_id: CHANNEL_UUID });
    expect(androidChannel('promotions')).toEqual({ existing_android_channel_id: 'promotions' });
    expect(androidChannel(undefined)).toEqual({});
  });

  it('names Android sounds without their extension', () => {
    expect([androidSound('coins.wav'), androidSound('coins'), androidSound('default'), androidSound('')]).toEqual(['coins', 'coins', undefined, undefined]);
  });
});

describe('createNotificationBody', () => {
  it('targets the subscriptions by id on the push channel, under the idempotency key', () => {
    const content = toOneSignalContent({ pushId: 'p', request: pushRequest(1, 'player') });
    const body = createNotificationBody('app-1', content, ['s-1', 's-2'], 'key-1');
    expect(body).toMatchObject({ app_id: 'app-1', target_channel: 'push', include_subscription_ids: ['s-1', 's-2'], idempotency_key: 'key-1', data: { push_id: 'p' } });
  });
});
