import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TSchema } from '@sinclair/typebox';
import { parse } from 'yaml';
import { loadDispatcherConfig } from '@operator/config';
import { APP_CONFIG_SCHEMAS } from '@operator/provider-registry';
import { interpolateAll, productionVariables } from './checks';

// docker-compose.yml against what each app reads, as Compose reads it with an .env that sets only
// what it requires: the variables interpolated (the others take their defaults) and YAML merge keys
// resolved.

type Json = Record<string, any>;

const ROOT = join(__dirname, '..');
const text = readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8');
/** The variables Compose refuses to start without (`${NAME:?message}`). */
const REQUIRED = [...new Set([...text.matchAll(/\$\{([A-Z0-9_]+):\?/g)].map((match) => match[1]))];
/** That .env: each required variable, with a value of its own. */
// Each at least 32 characters, as production requires of a secret.
const DOT_ENV = Object.fromEntries(REQUIRED.map((name) => [name, `${name.toLowerCase().replace(/_/g, '-')}-4f9c2a7d1e8b3c6a5f0d9e2b7c4a1f8e`]));
const composeWith = (env: Record<string, string>) => interpolateAll(parse(text, { merge: true }), env);
const services: Record<string, Json> = composeWith(DOT_ENV).services;
const IMAGE = 'crm-operator-api:local';
const APPS = Object.keys(APP_CONFIG_SCHEMAS);
const PUSH_WORKERS = APPS.filter((app) => app.startsWith('push-worker-'));

/** The default brand's credential variables of each push worker (PUSH_CREDENTIALS_FILE is the per-brand alternative). */
const CREDENTIALS: Record<string, string[]> = {
  'push-worker-fcm': ['FCM_SERVICE_ACCOUNT_FILE'],
  'push-worker-apns': ['APNS_KEY_FILE', 'APNS_KEY_ID', 'APNS_TEAM_ID', 'APNS_TOPIC'],
  'push-worker-webpush': ['VAPID_PUBLIC_KEY', 'VAPID_PRIVATE_KEY', 'VAPID_SUBJECT'],
};

const serviceOf = (app: string) => Object.values(services).find((service) => (service.command ?? []).includes(`dist/apps/${app}/main.js`))!;
const environment = (app: string): Record<string, string> => serviceOf(app).environment;

/** A Compose duration ("75s", "1m30s") in milliseconds. */
function durationMs(duration: string): number {
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60000, h: 3600000 };
  const parts = [...duration.matchAll(/(\d+)(ms|s|m|h)/g)];
  expect(parts.map(([part]) => part).join('')).toBe(duration);
  return parts.reduce((sum, [, amount, unit]) => sum + Number(amount) * units[unit], 0);
}

describe('docker-compose.yml', () => {
  it('runs every app, each once', () => {
    for (const app of APPS) expect(Object.values(services).filter((service) => (service.command ?? []).includes(`dist/apps/${app}/main.js`))).toHaveLength(1);
  });

  it('migrates once PostgreSQL is ready, directly rather than through PgBouncer', () => {
    expect(services.migrate.depends_on.postgres).toEqual({ condition: 'service_healthy' });
    expect(Object.keys(services.migrate.environment)).toEqual(['MIGRATE_DATABASE_URL']);
    expect(new URL(services.migrate.environment.MIGRATE_DATABASE_URL).host).toBe('postgres:5432');
  });

  it.each(APPS)('connects %s to PostgreSQL through PgBouncer in transaction mode', (app) => {
    expect(new URL(environment(app).DATABASE_URL).host).toBe('pgbouncer:5432');
    expect(serviceOf(app).depends_on.pgbouncer).toBeDefined();
    const pooler = services.pgbouncer.environment;
    expect(pooler.POOL_MODE).toBe('transaction');
    expect(pooler.DATABASE_URL).toBe(services.migrate.environment.MIGRATE_DATABASE_URL);
    // The apps log in to PgBouncer with the user and password it logs in to PostgreSQL with.
    const [apps, server] = [new URL(environment(app).DATABASE_URL), new URL(pooler.DATABASE_URL)];
    expect([apps.username, apps.password, apps.pathname]).toEqual([server.username, server.password, server.pathname]);
  });

  it('builds one image, once, and runs every app and the migration from it without pulling it', () => {
    const built = Object.entries(services).filter(([, service]) => service.build);
    expect(built).toHaveLength(1);
    const [[builder, { image }]] = built;
    expect(services[builder].command).toEqual(['node', 'tools/db-migrate.mjs']);
    for (const app of APPS) expect(serviceOf(app)).toEqual(expect.objectContaining({ image, pull_policy: 'never' }));
  });

  it.each(APPS)('sets for %s only variables its configuration reads', (app) => {
    const schema = APP_CONFIG_SCHEMAS[app];
    expect(Object.keys(environment(app)).filter((name) => !(name in schema.properties))).toEqual([]);
  });

  it.each(APPS)('sets for %s every variable it needs in production', (app) => {
    const env = environment(app);
    expect(productionVariables(APP_CONFIG_SCHEMAS[app]).filter((name) => !(name in env))).toEqual([]);
    expect(env.NODE_ENV).toBe('production');
    if (CREDENTIALS[app]) expect([...CREDENTIALS[app], 'PUSH_CREDENTIALS_FILE'].filter((name) => !(name in env))).toEqual([]);
  });

  it('gives a setting that several apps read to each of them, alike', () => {
    const settings = new Map<string, string>();
    for (const app of APPS) for (const [name, value] of Object.entries(environment(app))) if (!settings.has(name)) settings.set(name, value);
    for (const app of APPS) {
      const reads = Object.keys(APP_CONFIG_SCHEMAS[app].properties);
      const shared = [...settings].filter(([name]) => reads.includes(name));
      expect({ app, env: Object.fromEntries(shared.map(([name]) => [name, environment(app)[name]])) }).toEqual({ app, env: Object.fromEntries(shared) });
    }
  });

  it.each(APPS)('checks that %s is ready, on the port it serves, and starts it after its stores', (app) => {
    const service = serviceOf(app);
    const port = environment(app)[app === 'gateway' ? 'PORT' : 'METRICS_PORT'];
    expect(service.healthcheck.test.join(' ')).toContain(`http://127.0.0.1:${port}/health/ready`);
    const reads = APP_CONFIG_SCHEMAS[app].properties;
    expect(service.depends_on.migrate).toEqual({ condition: 'service_completed_successfully' });
    expect(service.depends_on.postgres).toEqual({ condition: 'service_healthy' });
    if ('REDIS_URL' in reads) expect(service.depends_on.redis).toEqual({ condition: 'service_healthy' });
  });

  it.each(APPS)('stops %s with a grace period past its shutdown deadline and its claims', (app) => {
    const graceMs = durationMs(serviceOf(app).stop_grace_period);
    const fields = APP_CONFIG_SCHEMAS[app].properties as Record<string, TSchema>;
    const valueOf = (name: string) => Number(environment(app)[name] ?? fields[name].default);
    expect(graceMs).toBeGreaterThan(valueOf('SHUTDOWN_TIMEOUT_MS'));
    if ('PUSH_CLAIM_LEASE_MS' in fields) expect(graceMs).toBeGreaterThan(valueOf('PUSH_CLAIM_LEASE_MS'));
  });

  it('starts each push worker only with its profile, so unused ones do not crash-loop', () => {
    for (const app of PUSH_WORKERS) expect(serviceOf(app).profiles).toHaveLength(1);
    for (const app of APPS.filter((name) => !PUSH_WORKERS.includes(name))) expect(serviceOf(app).profiles).toBeUndefined();
  });

  it('runs Redis append-only, bounded, and never evicting queue data', () => {
    const args: string[] = services.redis.command;
    const option = (name: string) => args[args.indexOf(name) + 1];
    expect(option('--appendonly')).toBe('yes');
    expect(option('--maxmemory-policy')).toBe('noeviction');
    expect(option('--maxmemory')).toMatch(/^\d+(kb|mb|gb)$/);
  });

  it('lists in .env.example every variable it requires, and the push worker profiles', () => {
    const example = readFileSync(join(ROOT, '.env.example'), 'utf8');
    const listed = new Set([...example.matchAll(/^([A-Z][A-Z0-9_]*)=/gm)].map((match) => match[1]));
    const required = [...text.matchAll(/\$\{([A-Z0-9_]+):\?/g)].map((match) => match[1]);
    expect(required.length).toBeGreaterThan(0);
    expect([...required, 'COMPOSE_PROFILES'].filter((name) => !listed.has(name))).toEqual([]);
    const profiles = PUSH_WORKERS.flatMap((app) => serviceOf(app).profiles);
    // Every worker's profile is named where the variable is explained; the example runs a choice of them.
    expect(example).toContain(`# The push workers to run, comma-separated: ${profiles.join(', ')}.`);
    const chosen = /^COMPOSE_PROFILES=(.*)$/m.exec(example)![1].split(',');
    expect(chosen.length).toBeGreaterThan(0);
    expect(profiles).toEqual(expect.arrayContaining(chosen));
  });

  it('takes every password and secret from .env, and requires them: none is written in it, none has a default', () => {
    expect(REQUIRED).toEqual(expect.arrayContaining(['POSTGRES_PASSWORD', 'REDIS_PASSWORD', 'TRACKING_SECRET', 'CRM_WEBHOOK_SECRET', 'OPERATOR_API_KEYS']));
    const given = new Set(Object.values(DOT_ENV));
    const secretName = /PASSWORD|_PASS$|SECRET|_KEYS?$|^REDISCLI_AUTH$/;
    for (const [name, service] of Object.entries(services)) {
      const env: Record<string, string> = service.environment ?? {};
      const values = [...Object.values(env), ...(Array.isArray(service.command) ? service.command : [])].map(String);
      const literal = [
        ...Object.entries(env).filter(([variable, value]) => secretName.test(variable) && value !== '' && !given.has(value)).map(([variable]) => variable),
        ...values.filter((value) => URL.canParse(value) && new URL(value).password && !given.has(decodeURIComponent(new URL(value).password))),
      ];
      expect({ service: name, literal }).toEqual({ service: name, literal: [] });
    }
    const defaulted = [...text.matchAll(/\$\{([A-Z0-9_]+):?-([^}]+)\}/g)].filter(([, variable]) => secretName.test(variable)).map(([whole]) => whole);
    expect(defaulted).toEqual([]);
    expect(services.postgres.environment.POSTGRES_PASSWORD).toBe(DOT_ENV.POSTGRES_PASSWORD);
    expect(decodeURIComponent(new URL(services.migrate.environment.MIGRATE_DATABASE_URL).password)).toBe(DOT_ENV.POSTGRES_PASSWORD);
    for (const name of REQUIRED) {
      const { [name]: _left, ...rest } = DOT_ENV;
      expect(() => composeWith(rest)).toThrow(`required variable ${name} is missing a value`);
    }
  });

  it('makes Redis ask for REDIS_PASSWORD, which every app that uses it and the health check give', () => {
    const args: string[] = services.redis.command;
    expect(args[args.indexOf('--requirepass') + 1]).toBe(DOT_ENV.REDIS_PASSWORD);
    // redis-cli reads the password from REDISCLI_AUTH, and answers an error, not PONG, without it.
    expect(services.redis.environment.REDISCLI_AUTH).toBe(DOT_ENV.REDIS_PASSWORD);
    expect(services.redis.healthcheck.test).toEqual(['CMD-SHELL', 'redis-cli ping | grep -q PONG']);
    for (const app of APPS.filter((name) => 'REDIS_URL' in APP_CONFIG_SCHEMAS[name].properties)) {
      expect({ app, password: environment(app).REDIS_PASSWORD }).toEqual({ app, password: DOT_ENV.REDIS_PASSWORD });
      expect(new URL(environment(app).REDIS_URL).host).toBe('redis:6379');
    }
  });

  it('gives the dispatcher no RabbitMQ URL of its own: with the rabbitmq transport, production refuses to start until one is set', () => {
    const env = environment('webhook-dispatcher');
    expect(env.CRM_EVENTS_AMQP_URL).toBe('');
    expect(() => loadDispatcherConfig(env)).not.toThrow();
    expect(() => loadDispatcherConfig({ ...env, CRM_EVENTS_TRANSPORT: 'rabbitmq' })).toThrow(/CRM_EVENTS_AMQP_URL/);
    expect(() => loadDispatcherConfig({ ...env, CRM_EVENTS_TRANSPORT: 'rabbitmq', CRM_EVENTS_AMQP_URL: 'amqps://crm:s3cret@broker.crm.example:5671' })).not.toThrow();
  });

  it('publishes the gateway alone, on 127.0.0.1 unless GATEWAY_BIND opens it', () => {
    const published = Object.entries(services).filter(([, service]) => service.ports || service.network_mode === 'host');
    expect(published.map(([name]) => name)).toEqual(['gateway']);
    expect(services.gateway.ports).toEqual([`127.0.0.1:3000:${environment('gateway').PORT}`]);
    expect(composeWith({ ...DOT_ENV, GATEWAY_BIND: '0.0.0.0', GATEWAY_PORT: '8080' }).services.gateway.ports).toEqual(['0.0.0.0:8080:3000']);
  });

  it('runs every app and the migration on a read-only root filesystem, with a tmpfs at /tmp, no capabilities and no new privileges', () => {
    const fromImage = Object.entries(services).filter(([, service]) => service.image === IMAGE);
    expect(fromImage.map(([name]) => name).sort()).toEqual([...APPS.map((app) => Object.keys(services).find((name) => services[name] === serviceOf(app))), 'migrate'].sort());
    for (const [name, service] of fromImage) {
      const { read_only, cap_drop, cap_add, security_opt, tmpfs, privileged, user } = service;
      expect({ name, read_only, cap_drop, cap_add, privileged, user }).toEqual({ name, read_only: true, cap_drop: ['ALL'], cap_add: undefined, privileged: undefined, user: undefined });
      expect(security_opt).toContain('no-new-privileges:true');
      expect(tmpfs).toContainEqual(expect.stringMatching(/^\/tmp(:|$)/));
    }
  });

  it('lets no service gain privileges, and runs PgBouncer locked down like the apps', () => {
    for (const [name, service] of Object.entries(services)) {
      expect({ name, security_opt: service.security_opt, privileged: service.privileged }).toEqual({ name, security_opt: expect.arrayContaining(['no-new-privileges:true']), privileged: undefined });
    }
    expect(services.pgbouncer).toEqual(expect.objectContaining({ read_only: true, cap_drop: ['ALL'], tmpfs: [expect.stringMatching(/^\/etc\/pgbouncer(:|$)/)] }));
  });

  it('keeps secrets and local state out of the image', () => {
    const ignored = readFileSync(join(ROOT, '.dockerignore'), 'utf8').split('\n');
    for (const entry of ['.env', 'secrets/', '.git', 'node_modules', 'dist']) expect(ignored).toContain(entry);
  });
});
