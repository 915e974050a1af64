import { ConfigError, type Env } from './env';
import { DEV_AMQP_URL, DEV_WEBHOOK_SECRET, loadDispatcherConfig } from './events';

// The dispatcher's ways to the CRM: the status webhook's format (the event, or the CRM's conversion
// endpoint) and how bonus and balance events travel (POSTs, or RabbitMQ).

function problems(env: Env): string[] {
  try {
    loadDispatcherConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

const PRODUCTION = { NODE_ENV: 'production', CRM_WEBHOOK_SECRET: 'webhook-secret-Hn4Qz8Wc1Ry6Tk3Xb9M' };
const CRM_PASSWORD = 'crm-password-Dv5Lp2Sg7Jm0Bq4Nf8Zw';

describe('loadDispatcherConfig: events transport', () => {
  it('posts by default, with the local broker and the crm-events exchange ready for rabbitmq', () => {
    expect(loadDispatcherConfig({})).toMatchObject({ CRM_EVENTS_TRANSPORT: 'http', CRM_EVENTS_AMQP_URL: DEV_AMQP_URL, CRM_EVENTS_AMQP_EXCHANGE: 'crm-events' });
  });

  it('reads rabbitmq with its broker and exchange', () => {
    const env = { CRM_EVENTS_TRANSPORT: 'rabbitmq', CRM_EVENTS_AMQP_URL: 'amqps://crm:s3cret@mq.example.com:5671/crm', CRM_EVENTS_AMQP_EXCHANGE: 'operator-events' };
    expect(loadDispatcherConfig({ ...PRODUCTION, ...env })).toMatchObject(env);
  });

  it('refuses another transport', () => {
    expect(problems({ CRM_EVENTS_TRANSPORT: 'kafka' })).toEqual(['CRM_EVENTS_TRANSPORT must be one of http, rabbitmq, got "kafka"']);
  });

  it('refuses a broker URL that is not amqp(s), without repeating it (it holds a password)', () => {
    for (const url of ['http://crm:s3cret@mq.example.com', 'crm:s3cret@mq']) {
      const found = problems({ CRM_EVENTS_TRANSPORT: 'rabbitmq', CRM_EVENTS_AMQP_URL: url });
      expect(found).toEqual(['CRM_EVENTS_AMQP_URL must be an amqp:// or amqps:// URL']);
    }
  });

  it('refuses the local development broker in production, only when it is used', () => {
    expect(problems({ ...PRODUCTION, CRM_EVENTS_TRANSPORT: 'rabbitmq' })).toEqual([
      "CRM_EVENTS_AMQP_URL is the local development broker; set the CRM's RabbitMQ in production",
    ]);
    expect(problems(PRODUCTION)).toEqual([]);
    expect(problems({ CRM_EVENTS_TRANSPORT: 'rabbitmq', CRM_WEBHOOK_SECRET: DEV_WEBHOOK_SECRET })).toEqual([]);
  });
});

describe('loadDispatcherConfig: status webhook format', () => {
  it('posts events, delivered on the provider, by default', () => {
    expect(loadDispatcherConfig({})).toMatchObject({ CRM_STATUS_WEBHOOK_FORMAT: 'event', CRM_CONVERSION_DELIVERED_ON: 'provider' });
  });

  it('reads the conversion format and when it counts a delivery', () => {
    const config = loadDispatcherConfig({ CRM_STATUS_WEBHOOK_FORMAT: 'conversion', CRM_CONVERSION_DELIVERED_ON: 'device' });
    expect(config).toMatchObject({ CRM_STATUS_WEBHOOK_FORMAT: 'conversion', CRM_CONVERSION_DELIVERED_ON: 'device' });
  });

  it('lists the valid values of each unknown one, every problem at once', () => {
    expect(problems({ CRM_STATUS_WEBHOOK_FORMAT: 'conversions', CRM_CONVERSION_DELIVERED_ON: 'Device' })).toEqual([
      'CRM_STATUS_WEBHOOK_FORMAT must be one of event, conversion, got "conversions"',
      'CRM_CONVERSION_DELIVERED_ON must be one of provider, device, got "Device"',
    ]);
  });

  it('refuses the conversion format without Basic credentials in production, and takes it in development', () => {
    expect(problems({ ...PRODUCTION, CRM_STATUS_WEBHOOK_FORMAT: 'conversion' })).toEqual([
      "CRM_STATUS_WEBHOOK_FORMAT=conversion needs CRM_WEBHOOK_USERNAME and CRM_WEBHOOK_PASSWORD (the CRM's conversion endpoint takes Basic auth)",
    ]);
    expect(problems({ ...PRODUCTION, CRM_STATUS_WEBHOOK_FORMAT: 'conversion', CRM_WEBHOOK_USERNAME: 'crm', CRM_WEBHOOK_PASSWORD: CRM_PASSWORD })).toEqual([]);
    expect(problems({ ...PRODUCTION, CRM_STATUS_WEBHOOK_FORMAT: 'conversion', CRM_WEBHOOK_USERNAME: 'crm' })).toEqual([
      'CRM_WEBHOOK_USERNAME and CRM_WEBHOOK_PASSWORD go together',
    ]);
    expect(problems({ ...PRODUCTION })).toEqual([]);
    expect(problems({ CRM_STATUS_WEBHOOK_FORMAT: 'conversion' })).toEqual([]);
  });
});

describe('loadDispatcherConfig: batched status webhook', () => {
  it('posts one event per request by default, and reads a batch maximum', () => {
    expect(loadDispatcherConfig({})).toMatchObject({ CRM_STATUS_WEBHOOK_BATCH_MAX: 1 });
    expect(loadDispatcherConfig({ CRM_STATUS_WEBHOOK_BATCH_MAX: '100' })).toMatchObject({ CRM_STATUS_WEBHOOK_BATCH_MAX: 100 });
  });

  it('refuses a batch with the conversion format, past the maximum, or beyond the events claimed at once', () => {
    expect(problems({ CRM_STATUS_WEBHOOK_BATCH_MAX: '2', CRM_STATUS_WEBHOOK_FORMAT: 'conversion' })).toEqual([
      "CRM_STATUS_WEBHOOK_BATCH_MAX must be 1 with CRM_STATUS_WEBHOOK_FORMAT=conversion (the CRM's conversion endpoint takes one event per call)",
    ]);
    expect(problems({ CRM_STATUS_WEBHOOK_BATCH_MAX: '1', CRM_STATUS_WEBHOOK_FORMAT: 'conversion' })).toEqual([]);
    expect(problems({ CRM_STATUS_WEBHOOK_BATCH_MAX: '1001' })).toHaveLength(1);
    expect(problems({ CRM_STATUS_WEBHOOK_BATCH_MAX: '0' })).toHaveLength(1);
    expect(problems({ CRM_STATUS_WEBHOOK_BATCH_MAX: '500', WEBHOOK_BATCH_SIZE: '200' })).toEqual([
      'CRM_STATUS_WEBHOOK_BATCH_MAX must not exceed WEBHOOK_BATCH_SIZE (the events claimed at once)',
    ]);
  });
});

describe('loadDispatcherConfig: secrets in production', () => {
  it('refuses a weak signing secret, Basic password or API key towards the CRM, naming each and never its value', () => {
    const found = problems({ NODE_ENV: 'production', CRM_WEBHOOK_SECRET: 'only-sixteen-chr', CRM_WEBHOOK_USERNAME: 'crm', CRM_WEBHOOK_PASSWORD: 'hunter2', CRM_WEBHOOK_API_KEY: 'x'.repeat(40) });
    expect(found).toEqual([
      'CRM_WEBHOOK_SECRET is shorter than 32 characters',
      'CRM_WEBHOOK_PASSWORD is shorter than 32 characters',
      'CRM_WEBHOOK_API_KEY is one character repeated',
    ]);
    expect(found.join(' ')).not.toMatch(/only-sixteen|hunter2|xxxx/);
  });

  it('asks nothing of the password and API key left empty, and nothing of any secret outside production', () => {
    expect(problems(PRODUCTION)).toEqual([]);
    expect(problems({ CRM_WEBHOOK_SECRET: 'only-sixteen-chr', CRM_WEBHOOK_USERNAME: 'crm', CRM_WEBHOOK_PASSWORD: 'pw', CRM_WEBHOOK_API_KEY: 'key' })).toEqual([]);
  });

  it('refuses the development secret once, as such', () => {
    expect(problems({ NODE_ENV: 'production' })).toEqual(['CRM_WEBHOOK_SECRET holds the development secret; set a real one in production']);
  });
});
