import { loadBonusAppConfig } from './bonus';
import { loadGatewayConfig } from './config';
import { loadDispatcherConfig } from './events';
import { loadPushWorkerConfig } from '@operator/provider-registry';
import { MIN_SECRET_LENGTH, secretWeakness, weakSecretProblems } from './secrets';
import { configErrorOf } from '@operator/testing';

// Production refuses a weak secret at start, in every app that reads it: fewer than 32 characters,
// or one character repeated. The problem names the variable, never the value.

const STRONG = {
  TRACKING_SECRET: 'tracking-secret-3q9VwXk2LmZr7TbN5yHc',
  OPERATOR_API_KEYS: 'crm-key-Zq3VfN1xLw5Tb7Ry2Kp9Hs4M',
  INTERNAL_API_KEYS: 'backend-key-Pt4Ys9Fk2Hw6Nz1Rd8Gx',
  CRM_WEBHOOK_SECRET: 'webhook-secret-Hn4Qz8Wc1Ry6Tk3Xb9M',
};
const PRODUCTION = { NODE_ENV: 'production', ...STRONG };

describe('secretWeakness', () => {
  it.each([
    ['', 'shorter than 32 characters'],
    ['k', 'shorter than 32 characters'],
    ['n3Wq8Zr1Kx5Tb7Lm2Vc9Hs4Jd6Pf0Gae', undefined],
    ['a'.repeat(31), 'shorter than 32 characters'],
    ['a'.repeat(32), 'one character repeated'],
    ['🔑'.repeat(40), 'one character repeated'],
    [`${'a'.repeat(31)}b`, undefined],
    // What `openssl rand -base64 32` prints.
    ['9m7sYv0pQ2xJ4bL8nR6tW1zC3kF5hD9gA2eU7iO0qPs=', undefined],
  ])('%p: %p', (secret, weakness) => {
    expect(secretWeakness(secret)).toBe(weakness);
  });

  it('counts characters, not bytes', () => {
    expect(MIN_SECRET_LENGTH).toBe(32);
    expect(secretWeakness('é'.repeat(16) + 'ß'.repeat(15))).toBe('shorter than 32 characters');
  });
});

describe('weakSecretProblems', () => {
  it('names a single variable, and asks nothing of one left empty', () => {
    expect(weakSecretProblems('TRACKING_SECRET', 'short')).toEqual(['TRACKING_SECRET is shorter than 32 characters']);
    expect(weakSecretProblems('CRM_WEBHOOK_API_KEY', '')).toEqual([]);
  });

  it('names each weak entry of a list by its place, passing over the development value', () => {
    expect(weakSecretProblems('KEYS', ['dev-key', STRONG.OPERATOR_API_KEYS, 'z'.repeat(32)], { development: 'dev-key' })).toEqual(['KEYS: the 3rd key is one character repeated']);
    expect(weakSecretProblems('USERS', ['pw'], { what: 'password' })).toEqual(['USERS: the 1st password is shorter than 32 characters']);
  });
});

describe('production refuses weak secrets in every app that reads them', () => {
  const problems = (load: () => unknown) => configErrorOf(load).problems;

  it('refuses a one-character OPERATOR_API_KEYS at the gateway, naming it and not the key', () => {
    const found = problems(() => loadGatewayConfig({ ...PRODUCTION, OPERATOR_API_KEYS: 'k' }));
    expect(found).toEqual(['OPERATOR_API_KEYS: the 1st key is shorter than 32 characters']);
    expect(found.join(' ')).not.toMatch(/\bk\b/);
  });

  it('refuses, all at once, every weak key, secret and password the gateway reads', () => {
    const found = problems(() =>
      loadGatewayConfig({
        ...PRODUCTION,
        OPERATOR_API_KEYS: `${STRONG.OPERATOR_API_KEYS},${'a'.repeat(32)}`,
        INTERNAL_API_KEYS: 'backend',
        TRACKING_SECRET: 't'.repeat(40),
        BONUS_PLATFORM_API_KEY: 'wallet-key',
        CRM_AUTH: 'api-key,basic,oauth2',
        CRM_BASIC_USERS: 'crm:hunter2',
        CRM_OAUTH_CLIENTS: 'crm:s3cr3t',
        CRM_OAUTH_SIGNING_KEYS: 'a'.repeat(32),
      }),
    );
    expect(found).toEqual([
      'OPERATOR_API_KEYS: the 2nd key is one character repeated',
      'INTERNAL_API_KEYS: the 1st key is shorter than 32 characters',
      'TRACKING_SECRET is one character repeated',
      'BONUS_PLATFORM_API_KEY is shorter than 32 characters',
      'CRM_OAUTH_SIGNING_KEYS: the 1st key is one character repeated',
      'CRM_BASIC_USERS: the 1st password is shorter than 32 characters',
      'CRM_OAUTH_CLIENTS: the 1st secret is shorter than 32 characters',
    ]);
    expect(found.join(' ')).not.toMatch(/aaaa|tttt|backend|wallet-key|hunter2|s3cr3t/);
  });

  it('refuses a weak TRACKING_SECRET at a push worker', () => {
    const env = { NODE_ENV: 'production', TRACKING_SECRET: 'sixteen-chars-ok', FCM_SERVICE_ACCOUNT_FILE: '/nonexistent/service-account.json' };
    expect(problems(() => loadPushWorkerConfig('fcm', env))).toContain('TRACKING_SECRET is shorter than 32 characters');
  });

  it('refuses a weak BONUS_PLATFORM_API_KEY at the bonus app, and asks nothing of one left empty', () => {
    expect(problems(() => loadBonusAppConfig({ NODE_ENV: 'production', BONUS_PLATFORM_API_KEY: 'k'.repeat(32) }))).toEqual(['BONUS_PLATFORM_API_KEY is one character repeated']);
    expect(loadBonusAppConfig({ NODE_ENV: 'production' }).BONUS_PLATFORM_API_KEY).toBe('');
  });

  it('refuses a weak CRM_WEBHOOK_SECRET at the dispatcher', () => {
    expect(problems(() => loadDispatcherConfig({ NODE_ENV: 'production', CRM_WEBHOOK_SECRET: 'a-sixteen-or-more-chars' }))).toEqual(['CRM_WEBHOOK_SECRET is shorter than 32 characters']);
  });

  it('takes strong secrets, and weak ones outside production', () => {
    expect(loadGatewayConfig(PRODUCTION).NODE_ENV).toBe('production');
    expect(loadGatewayConfig({ OPERATOR_API_KEYS: 'k', TRACKING_SECRET: 't'.repeat(16), BONUS_PLATFORM_API_KEY: 'x' }).operatorApiKeys).toEqual([{ key: 'k', brands: null }]);
    expect(loadBonusAppConfig({ BONUS_PLATFORM_API_KEY: 'x' }).BONUS_PLATFORM_API_KEY).toBe('x');
  });
});
