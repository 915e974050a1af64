import { loadBonusAppConfig } from './bonus';
import { loadGatewayConfig } from './config';
import type { Env } from './env';
import { loadDispatcherConfig } from './events';
import { loadPushWorkerConfig } from '@operator/provider-registry';
import { configErrorOf } from '@operator/testing';
import { multiHostProblem } from './base';

// node-postgres connects to one host: a URL that lists several (libpq's failover form) is refused
// at start in one line naming what to use instead, by every app, and by the migration tool in the
// same words (tools/pg-admin.cjs).

const LOADERS: [string, (env: Env) => unknown][] = [
  ['gateway', loadGatewayConfig],
  ['push worker', (env) => loadPushWorkerConfig('webpush', env)],
  ['bonus app', loadBonusAppConfig],
  ['webhook dispatcher', loadDispatcherConfig],
];

const REFUSED = [
  'postgresql://app:secret@db-1:5432,db-2:5432/operator_api?target_session_attrs=read-write',
  'postgresql://db-1,db-2/operator_api',
  'postgres://app@/operator_api?host=db-1,db-2&target_session_attrs=read-write',
];

describe.each(LOADERS)('%s: DATABASE_URL of several hosts', (_app, load) => {
  it.each(REFUSED)('refuses %s in one line, without its credentials', (url) => {
    const problems = configErrorOf(() => load({ DATABASE_URL: url })).problems;
    const line = "DATABASE_URL lists several hosts, and the PostgreSQL driver connects to one: give one address that always reaches the primary (PgBouncer, HAProxy with Patroni, CloudNativePG's -rw Service, a managed database's writer endpoint)";
    expect(problems).toEqual([line]);
    expect(line).not.toContain('secret');
  });

  it('takes one host, a pooler or a writer endpoint', () => {
    expect(() => load({ DATABASE_URL: 'postgresql://app:secret@pgbouncer:6432/operator_api?application_name=gateway' })).not.toThrow();
    expect(() => load({ DATABASE_URL: 'postgresql://app@[::1]:5432/operator_api' })).not.toThrow();
  });
});

describe('multiHostProblem', () => {
  it('says what tools/pg-admin.cjs says', () => {
    const tools = require('../../../tools/pg-admin.cjs') as { multiHostProblem(name: string, url: string): string | undefined };
    for (const url of REFUSED) expect(tools.multiHostProblem('MIGRATE_DATABASE_URL', url)).toBe(multiHostProblem('MIGRATE_DATABASE_URL', url));
    expect(tools.multiHostProblem('DATABASE_URL', 'postgresql://db/operator_api')).toBeUndefined();
  });
});

// DATABASE_READ_URL: a replica for the reads that may lag, read by the apps that have such reads;
// empty, they read from DATABASE_URL. A bad one is refused in one line that never quotes it.
const READERS = LOADERS.filter(([app]) => app !== 'push worker') as [string, (env: Env) => { DATABASE_URL: string; DATABASE_READ_URL: string }][];

describe.each(READERS)('%s: DATABASE_READ_URL', (_app, load) => {
  it('defaults to DATABASE_URL', () => {
    const url = 'postgresql://app:secret@pgbouncer:6432/operator_api';
    expect(load({ DATABASE_URL: url }).DATABASE_READ_URL).toBe(url);
    expect(load({ DATABASE_URL: url, DATABASE_READ_URL: '' }).DATABASE_READ_URL).toBe(url);
  });

  it('takes a replica of its own', () => {
    const config = load({ DATABASE_URL: 'postgresql://app@db-rw/operator_api', DATABASE_READ_URL: 'postgresql://app:secret@db-ro:5432/operator_api' });
    expect(config).toMatchObject({ DATABASE_URL: 'postgresql://app@db-rw/operator_api', DATABASE_READ_URL: 'postgresql://app:secret@db-ro:5432/operator_api' });
  });

  it.each(['db-ro:5432/operator_api', 'http://app:secret@db-ro/operator_api', 'postgresql://app:secret@db ro/x', 'not a url secret'])('refuses %s in one line, without its password', (url) => {
    const problems = configErrorOf(() => load({ DATABASE_READ_URL: url })).problems;
    expect(problems).toEqual(['DATABASE_READ_URL must be a postgresql:// URL with a host (or empty, to read from DATABASE_URL)']);
  });

  it('refuses several hosts, naming what to give instead', () => {
    const problems = configErrorOf(() => load({ DATABASE_READ_URL: 'postgresql://app:secret@db-1,db-2/operator_api' })).problems;
    expect(problems).toEqual([
      "DATABASE_READ_URL lists several hosts, and the PostgreSQL driver connects to one: give one address that reaches a replica (PgBouncer or HAProxy in front of the replicas, CloudNativePG's -ro Service, a managed database's reader endpoint)",
    ]);
    expect(problems.join()).not.toContain('secret');
  });
});
