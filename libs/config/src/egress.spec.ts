import { ConfigError } from './env';
import { loadBonusAppConfig } from './bonus';
import { loadDispatcherConfig } from './events';
import { loadPushWorkerConfig } from '@operator/provider-registry';

function problemsOf(load: () => unknown): string[] {
  try {
    load();
    return [];
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
}

const PRODUCTION = { NODE_ENV: 'production', CRM_WEBHOOK_SECRET: 'webhook-secret-Hn4Qz8Wc1Ry6Tk3Xb9M' };

describe('outbound settings', () => {
  it('reads HTTPS_PROXY, HTTP_PROXY and NO_PROXY, the lower-case names when the upper-case ones are unset', () => {
    expect(loadDispatcherConfig({ HTTPS_PROXY: 'http://proxy:3128', http_proxy: 'proxy:8080', no_proxy: '.svc' }).egress).toEqual({
      httpsProxy: 'http://proxy:3128',
      httpProxy: 'proxy:8080',
      noProxy: '.svc',
    });
    expect(loadBonusAppConfig({}).egress).toEqual({ httpsProxy: undefined, httpProxy: undefined, noProxy: undefined });
    expect(loadPushWorkerConfig('fcm', { https_proxy: 'http://p:1' }).egress.httpsProxy).toBe('http://p:1');
  });

  it('refuses a proxy that is not an http(s) URL, without quoting it', () => {
    const problems = problemsOf(() => loadDispatcherConfig({ HTTPS_PROXY: 'socks5://user:secret@proxy:1080' }));
    expect(problems).toEqual(['HTTPS_PROXY must be an http:// or https:// proxy URL']);
  });

  it('requires https for the wallet platform and the CRM in production, and says so without quoting the URL', () => {
    const dispatcher = problemsOf(() =>
      loadDispatcherConfig({ ...PRODUCTION, CRM_STATUS_WEBHOOK_URL: 'http://user:pw@crm.example/hook', CRM_EVENTS_BASE_URL: 'http://crm.example' }),
    );
    expect(dispatcher).toEqual(['CRM_STATUS_WEBHOOK_URL must be https in production', 'CRM_EVENTS_BASE_URL must be https in production']);
    expect(problemsOf(() => loadBonusAppConfig({ NODE_ENV: 'production', BONUS_PLATFORM_URL: 'http://wallet.internal/credits' }))).toEqual([
      'BONUS_PLATFORM_URL must be https in production',
    ]);
    // Development keeps plain http for local receivers.
    expect(problemsOf(() => loadDispatcherConfig({ CRM_STATUS_WEBHOOK_URL: 'http://127.0.0.1:9000/hook' }))).toEqual([]);
    expect(problemsOf(() => loadDispatcherConfig({ ...PRODUCTION, CRM_STATUS_WEBHOOK_URL: 'https://crm.example/hook' }))).toEqual([]);
  });
});
