import { pushRequest } from '@operator/testing';
import { hmsClickAction, hmsCollapseKey, hmsColor, hmsSendBody, hmsTtl, hmsUrgency, rawResource, toHmsMessage, HMS_MAX_TTL_SECONDS } from './message';

describe('toHmsMessage', () => {
  it('puts every contract field where Push Kit reads it', () => {
    const request = pushRequest(1, 'player', {
      title: 'Weekend reload',
      body: 'Your 50 free spins are waiting',
      image_url: 'https://cdn.example.test/promo/spins.png',
      android: {
        priority: 'high',
        ttl: '90m',
        collapse_key: '7',
        restricted_package_name: 'com.example.casino',
        icon: 'ic_promo',
        color_rgb: 'ff8800',
        sound: 'coins.wav',
        tag: 'promo',
        click_action: 'OPEN_PROMO',
        body_loc_key: 'promo_body',
        body_loc_arcs: ['50', 'spins'],
        title_loc_keys: 'promo_title',
        title_loc_args: ['Weekend'],
        channel_id: 'promotions',
      },
    });
    const message = toHmsMessage({ pushId: 'push-1', request, trackingToken: 'track-1' });
    expect(JSON.parse(message.data)).toEqual({ push_id: 'push-1', tracking_token: 'track-1' });
    expect(message.android).toEqual({
      collapse_key: 7,
      urgency: 'HIGH',
      ttl: '5400s',
      notification: {
        title: 'Weekend reload',
        body: 'Your 50 free spins are waiting',
        image: 'https://cdn.example.test/promo/spins.png',
        icon: '/raw/ic_promo',
        color: '#FF8800',
        sound: '/raw/coins',
        tag: 'promo',
        channel_id: 'promotions',
        click_action: { type: 1, action: 'OPEN_PROMO' },
        body_loc_key: 'promo_body',
        body_loc_args: ['50', 'spins'],
        title_loc_key: 'promo_title',
        title_loc_args: ['Weekend'],
      },
    });
    // No Push Kit field for it: the token already belongs to one app.
    expect(JSON.stringify(message)).not.toContain('com.example.casino');
  });

  it('sends a bare push with the default sound, the app opened on tap, and push_id only', () => {
    const message = toHmsMessage({ pushId: 'push-2', request: pushRequest(1, 'player') });
    expect(message).toEqual({
      data: '{"push_id":"push-2"}',
      android: { notification: { title: 'Weekend reload', body: 'Your 50 free spins are waiting', default_sound: true, click_action: { type: 3 } } },
    });
    expect(JSON.stringify(message)).not.toContain('undefined');
  });

  it('leaves out what Push Kit would refuse the whole message for', () => {
    const request = pushRequest(1, 'player', {
      image_url: 'http://cdn.example.test/plain.png',
      android: { collapse_key: 'weekend', color_rgb: 'red', ttl: 'soon', priority: 'urgent', body_loc_arcs: ['x'], title_loc_args: ['y'] },
    });
    expect(toHmsMessage({ pushId: 'p', request }).android).toEqual({
      notification: { title: request.title, body: request.body, default_sound: true, click_action: { type: 3 } },
    });
  });
});

describe('Push Kit field conversions', () => {
  it('writes the ttl in seconds, capped at 15 days', () => {
    expect(hmsTtl('3600')).toBe('3600s');
    expect(hmsTtl('3600s')).toBe('3600s');
    expect(hmsTtl('90m')).toBe('5400s');
    expect(hmsTtl('1h')).toBe('3600s');
    expect(hmsTtl('30d')).toBe(`${HMS_MAX_TTL_SECONDS}s`);
    expect(hmsTtl('1.5')).toBe('2s');
    expect(hmsTtl('never')).toBeUndefined();
    expect(hmsTtl(undefined)).toBeUndefined();
  });

  it('takes a collapse key only as an integer from -1 to 100', () => {
    expect(hmsCollapseKey('-1')).toBe(-1);
    expect(hmsCollapseKey('0')).toBe(0);
    expect(hmsCollapseKey(' 100 ')).toBe(100);
    for (const other of ['101', '-2', '1.5', 'weekend', '', '1e2', undefined]) expect(hmsCollapseKey(other)).toBeUndefined();
  });

  it('maps the priority to urgency', () => {
    expect(hmsUrgency('HIGH')).toBe('HIGH');
    expect(hmsUrgency('normal')).toBe('NORMAL');
    expect(hmsUrgency('max')).toBeUndefined();
  });

  it('writes colours as #RRGGBB', () => {
    expect(hmsColor('#a1b2c3')).toBe('#A1B2C3');
    expect(hmsColor('a1b2c3')).toBe('#A1B2C3');
    expect(hmsColor('#abc')).toBeUndefined();
  });

  it('names icons and sounds as files in /res/raw', () => {
    expect(rawResource('coins.wav')).toBe('/raw/coins');
    expect(rawResource('/raw/shake')).toBe('/raw/shake');
    expect(rawResource('sounds/bell.mp3')).toBe('/raw/bell');
    expect(rawResource('  ')).toBeUndefined();
  });

  it('opens https pages, activities by intent URI or action, else the app', () => {
    expect(hmsClickAction('https://casino.example.test/promo')).toEqual({ type: 2, url: 'https://casino.example.test/promo' });
    expect(hmsClickAction('casino://promo/42')).toEqual({ type: 1, intent: 'casino://promo/42' });
    expect(hmsClickAction('intent://promo#Intent;scheme=casino;end')).toEqual({ type: 1, intent: 'intent://promo#Intent;scheme=casino;end' });
    expect(hmsClickAction('http://casino.example.test/')).toEqual({ type: 1, intent: 'http://casino.example.test/' });
    expect(hmsClickAction('com.example.OPEN_PROMO')).toEqual({ type: 1, action: 'com.example.OPEN_PROMO' });
    expect(hmsClickAction('')).toEqual({ type: 3 });
    expect(hmsClickAction(undefined)).toEqual({ type: 3 });
  });
});

describe('hmsSendBody', () => {
  it('sends the message to the tokens, for real', () => {
    const message = toHmsMessage({ pushId: 'p', request: pushRequest(1, 'player') });
    expect(JSON.parse(hmsSendBody(message, ['a', 'b']))).toEqual({ validate_only: false, message: { ...message, token: ['a', 'b'] } });
  });
});
