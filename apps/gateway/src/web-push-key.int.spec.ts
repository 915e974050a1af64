import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError, loadGatewayConfig } from '@operator/config';
import { uniqueBrandId, vapidKeys } from '@operator/testing';
import { Harness } from './test/harness';

const ROOT = path.join(__dirname, '../../..');

// What a browser on the operator's site asks the gateway for without a key: the VAPID public key
// it subscribes with (by brand), and the tracking route's CORS preflight. And the SDK files that
// ask for them carry the project's version.

describe('the VAPID public key route and the browser preflight', () => {
  const fallback = vapidKeys().publicKey;
  const own = vapidKeys().publicKey;
  const brand = uniqueBrandId();
  let h: Harness;

  beforeAll(async () => {
    h = await Harness.open({ VAPID_PUBLIC_KEY: fallback, VAPID_PUBLIC_KEYS: `${brand}:${own}` });
  });
  afterAll(async () => {
    await h?.close();
  });

  const get = (query = '') => h.app.inject({ method: 'GET', url: `/v1/push/web/vapid-public-key${query}`, headers: { origin: 'https://casino.example.com' } });

  it("answers the brand's own key, else the default brand's, to any origin", async () => {
    const mine = await get(`?brand_id=${brand}`);
    expect(mine.statusCode).toBe(200);
    expect(mine.json()).toEqual({ public_key: own, brand_id: brand });
    expect(mine.headers['access-control-allow-origin']).toBe('*');
    expect(mine.headers['cache-control']).toBe('public, max-age=300');

    expect((await get(`?brand_id=${brand + 1}`)).json()).toEqual({ public_key: fallback, brand_id: brand + 1 });
    expect((await get()).json()).toEqual({ public_key: fallback, brand_id: null });
  });

  it('refuses a brand id that is not one with a JSON error', async () => {
    for (const query of ['?brand_id=seven', '?brand_id=-1', '?brand_id=1e3']) {
      const response = await get(query);
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({ error: expect.stringContaining('brand_id'), code: 400 });
    }
  });

  it('answers the preflight a service worker sends before reporting, private network included', async () => {
    const response = await h.app.inject({
      method: 'OPTIONS',
      url: '/v1/push/01920000-0000-7000-8000-000000000000/events',
      headers: {
        origin: 'https://casino.example.com',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type',
        'access-control-request-private-network': 'true',
      },
    });
    expect(response.statusCode).toBe(204);
    expect(response.headers).toMatchObject({
      'access-control-allow-origin': '*',
      'access-control-allow-methods': expect.stringContaining('POST'),
      'access-control-allow-headers': expect.stringContaining('content-type'),
      'access-control-allow-private-network': 'true',
    });
  });
});

describe('the VAPID public key route without a key', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await Harness.open({ VAPID_PUBLIC_KEY: '', VAPID_PUBLIC_KEYS: '' });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('answers 404 with the reason', async () => {
    const response = await h.app.inject({ method: 'GET', url: '/v1/push/web/vapid-public-key?brand_id=7' });
    expect(response.statusCode).toBe(404);
    expect(response.json()).toEqual({ error: 'no VAPID public key is configured for brand 7', code: 404 });
  });
});

describe('VAPID public key settings', () => {
  const problems = (env: Record<string, string>) => {
    try {
      loadGatewayConfig({ ...process.env, ...env });
      return [];
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      return error.problems.filter((problem) => problem.startsWith('VAPID'));
    }
  };

  it('refuses a key that is not an uncompressed P-256 public key, and entries that are not brand:key', () => {
    const key = vapidKeys().publicKey;
    expect(problems({ VAPID_PUBLIC_KEY: key, VAPID_PUBLIC_KEYS: `7:${key},8:${key}` })).toEqual([]);
    expect(problems({ VAPID_PUBLIC_KEY: 'not a key' })).toEqual(['VAPID_PUBLIC_KEY is not base64url']);
    expect(problems({ VAPID_PUBLIC_KEY: Buffer.alloc(65, 1).toString('base64url') })).toEqual([
      'VAPID_PUBLIC_KEY is not an uncompressed P-256 public key (65 bytes, base64url)',
    ]);
    expect(problems({ VAPID_PUBLIC_KEYS: `seven:${key}` })).toEqual(['VAPID_PUBLIC_KEYS entry "seven:' + key.slice(0, 14) + '" must be brand:key']);
    expect(problems({ VAPID_PUBLIC_KEYS: `7:${key},7:${key}` })).toEqual(['VAPID_PUBLIC_KEYS names brand 7 twice']);
  });
});

describe('the Web Push SDK files', () => {
  it("carry the project's version", () => {
    const { version } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
    for (const file of ['operator-push-sw.js', 'operator-push.js']) {
      const text = readFileSync(path.join(ROOT, 'sdk/web', file), 'utf8');
      expect({ file, header: text.includes(`(operator-api ${version})`), constant: text.includes(`var VERSION = '${version}';`) }).toEqual({ file, header: true, constant: true });
    }
  });

  it('parse as plain JavaScript, with or without a browser to run them', () => {
    for (const file of ['operator-push-sw.js', 'operator-push.js']) {
      expect(() => execFileSync(process.execPath, ['--check', path.join(ROOT, 'sdk/web', file)], { stdio: 'pipe' })).not.toThrow();
    }
  });
});
