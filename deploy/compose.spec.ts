import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TSchema } from '@sinclair/typebox';
import { parse } from 'yaml';
import { APP_CONFIG_SCHEMAS } from '@operator/config';
import { productionVariables } from './checks';

// docker-compose.yml against what each app reads, with YAML merge keys resolved as Compose does.

type Json = Record<string, any>;

const ROOT = join(__dirname, '..');
const text = readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8');
const compose = parse(text, { merge: true });
const services: Record<string, Json> = compose.services;
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

/** The value Compose gives a variable when the .env file leaves it unset: `${X:-default}` gives the default. */
function defaultOf(value: string): string {
  return value.replace(/\$\{[A-Z0-9_]+:-([^}]*)\}/g, '$1');
}

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
    const port = defaultOf(environment(app)[app === 'gateway' ? 'PORT' : 'METRICS_PORT']);
    expect(service.healthcheck.test.join(' ')).toContain(`http://127.0.0.1:${port}/health/ready`);
    const reads = APP_CONFIG_SCHEMAS[app].properties;
    expect(service.depends_on.migrate).toEqual({ condition: 'service_completed_successfully' });
    expect(service.depends_on.postgres).toEqual({ condition: 'service_healthy' });
    if ('REDIS_URL' in reads) expect(service.depends_on.redis).toEqual({ condition: 'service_healthy' });
  });

  it.each(APPS)('stops %s with a grace period past its shutdown deadline and its claims', (app) => {
    const graceMs = durationMs(serviceOf(app).stop_grace_period);
    const fields = APP_CONFIG_SCHEMAS[app].properties as Record<string, TSchema>;
    const valueOf = (name: string) => Number(defaultOf(environment(app)[name] ?? String(fields[name].default)));
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
    expect(defaultOf(option('--maxmemory'))).toMatch(/^\d+(kb|mb|gb)$/);
  });

  it('lists in .env.example every variable it requires, and the push worker profiles', () => {
    const example = readFileSync(join(ROOT, '.env.example'), 'utf8');
    const listed = new Set([...example.matchAll(/^([A-Z][A-Z0-9_]*)=/gm)].map((match) => match[1]));
    const required = [...text.matchAll(/\$\{([A-Z0-9_]+):\?/g)].map((match) => match[1]);
    expect(required.length).toBeGreaterThan(0);
    expect([...required, 'COMPOSE_PROFILES'].filter((name) => !listed.has(name))).toEqual([]);
    const profiles = PUSH_WORKERS.flatMap((app) => serviceOf(app).profiles);
    expect(example).toContain(`COMPOSE_PROFILES=${profiles.join(',')}`);
  });

  it('keeps secrets and local state out of the image', () => {
    const ignored = readFileSync(join(ROOT, '.dockerignore'), 'utf8').split('\n');
    for (const entry of ['.env', 'secrets/', '.git', 'node_modules', 'dist']) expect(ignored).toContain(entry);
  });
});
