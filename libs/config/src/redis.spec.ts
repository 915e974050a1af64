import { loadGatewayConfig } from './config';
import type { Env } from './env';
import { loadPushWorkerConfig } from '@operator/provider-registry';
import { describeRedis, parseAddress, redisConnectionOf, redisUrlConnection } from './redis';
import { configErrorOf } from '@operator/testing';

const connectionOf = (env: Env) => {
  const { connection, problems } = redisConnectionOf(env);
  expect(problems).toEqual([]);
  return connection;
};
const problemsOf = (env: Env) => redisConnectionOf(env).problems;

describe('redisConnectionOf: one server', () => {
  it('is the local Redis by default', () => {
    expect(connectionOf({})).toEqual({ mode: 'standalone', address: { host: '127.0.0.1', port: 6379 }, db: 0, tls: false });
  });

  it('reads the address, user, password and database from REDIS_URL, and TLS from rediss://', () => {
    expect(connectionOf({ REDIS_URL: 'rediss://app:p%40ss@redis.example.com:6380/2' })).toEqual({
      mode: 'standalone',
      address: { host: 'redis.example.com', port: 6380 },
      db: 2,
      username: 'app',
      password: 'p@ss',
      tls: true,
    });
    expect(connectionOf({ REDIS_URL: 'redis://[::1]:6390' })).toMatchObject({ address: { host: '::1', port: 6390 } });
  });

  it("takes REDIS_PASSWORD in place of the URL's, and REDIS_TLS=true as rediss://", () => {
    expect(connectionOf({ REDIS_URL: 'redis://:old@cache:6379', REDIS_PASSWORD: 'managed-secret', REDIS_TLS: 'true' })).toEqual({
      mode: 'standalone',
      address: { host: 'cache', port: 6379 },
      db: 0,
      password: 'managed-secret',
      tls: true,
    });
  });

  it('refuses a URL that is not redis:// or rediss://, without quoting it (it may hold a password)', () => {
    expect(problemsOf({ REDIS_URL: 'http://user:secret@cache:6379' })).toEqual(['REDIS_URL must be a redis:// or rediss:// URL']);
    expect(problemsOf({ REDIS_URL: 'not a url secret' })).toEqual(['REDIS_URL must be a redis:// or rediss:// URL']);
    expect(problemsOf({ REDIS_URL: 'redis://cache:6379/first' })).toEqual(['REDIS_URL: the database (its path) must be a number, like redis://host:6379/0']);
  });
});

describe('redisConnectionOf: Sentinel', () => {
  it('finds the master through REDIS_SENTINELS, not at REDIS_URL, whose credentials and database it keeps', () => {
    expect(
      connectionOf({
        REDIS_URL: 'redis://:data-secret@127.0.0.1:1/3',
        REDIS_SENTINELS: 'sentinel-0:26379, sentinel-1:26379,[fd00::2]:26380',
        REDIS_SENTINEL_NAME: 'operator-master',
        REDIS_SENTINEL_PASSWORD: 'sentinel-secret',
      }),
    ).toEqual({
      mode: 'sentinel',
      sentinels: [
        { host: 'sentinel-0', port: 26379 },
        { host: 'sentinel-1', port: 26379 },
        { host: 'fd00::2', port: 26380 },
      ],
      name: 'operator-master',
      sentinelPassword: 'sentinel-secret',
      db: 3,
      password: 'data-secret',
      tls: false,
    });
  });

  it('wants the master group name, and a host:port list', () => {
    expect(problemsOf({ REDIS_SENTINELS: 'sentinel-0:26379' })).toEqual([
      'REDIS_SENTINELS is set without REDIS_SENTINEL_NAME, the master group name the Sentinels monitor',
    ]);
    expect(problemsOf({ REDIS_SENTINELS: 'sentinel-0,sentinel-1:263790,:26379', REDIS_SENTINEL_NAME: 'master one' })).toEqual([
      'REDIS_SENTINEL_NAME must be a master group name (letters, digits, . _ -), got "master one"',
      'REDIS_SENTINELS: "sentinel-0" is not host:port',
      'REDIS_SENTINELS: "sentinel-1:263790" is not host:port',
      'REDIS_SENTINELS: ":26379" is not host:port',
    ]);
    expect(problemsOf({ REDIS_SENTINELS: ' , ', REDIS_SENTINEL_NAME: 'mymaster' })).toEqual(['REDIS_SENTINELS must name at least one host:port']);
  });

  it('refuses a Sentinel name or password without Sentinels', () => {
    expect(problemsOf({ REDIS_SENTINEL_NAME: 'mymaster' })).toEqual([
      'REDIS_SENTINEL_NAME and REDIS_SENTINEL_PASSWORD are read only with REDIS_SENTINELS: set it too, or leave them empty',
    ]);
  });
});

describe('redisConnectionOf: Cluster', () => {
  it('starts from REDIS_CLUSTER_NODES, with the password and TLS of REDIS_URL or REDIS_PASSWORD and REDIS_TLS', () => {
    expect(connectionOf({ REDIS_CLUSTER_NODES: 'node-0:6379,node-1:6379', REDIS_PASSWORD: 'secret', REDIS_TLS: 'yes' })).toEqual({
      mode: 'cluster',
      nodes: [
        { host: 'node-0', port: 6379 },
        { host: 'node-1', port: 6379 },
      ],
      password: 'secret',
      tls: true,
    });
  });

  it('refuses Sentinel and Cluster together, malformed nodes and a database other than 0', () => {
    expect(problemsOf({ REDIS_URL: 'redis://cache:6379/1', REDIS_CLUSTER_NODES: 'node-0', REDIS_SENTINELS: 's:26379', REDIS_SENTINEL_NAME: 'm' })).toEqual([
      'REDIS_SENTINELS and REDIS_CLUSTER_NODES are both set: set one (Sentinel or Cluster)',
    ]);
    expect(problemsOf({ REDIS_URL: 'redis://cache:6379/1', REDIS_CLUSTER_NODES: 'node-0' })).toEqual([
      'REDIS_URL names database 1, but a Redis Cluster has only database 0',
      'REDIS_CLUSTER_NODES: "node-0" is not host:port',
    ]);
  });
});

describe('the apps read the Redis connection', () => {
  it('lists the Redis problems of the gateway with every other problem', () => {
    const error = configErrorOf(() => loadGatewayConfig({ PORT: 'eighty', REDIS_SENTINELS: 'sentinel:26379', REDIS_TLS: 'maybe', OPERATOR_API_KEYS: ',' }));
    expect(error.problems).toEqual(
      expect.arrayContaining([
        'PORT must be a number, got "eighty"',
        'REDIS_TLS must be true or false, got "maybe"',
        'REDIS_SENTINELS is set without REDIS_SENTINEL_NAME, the master group name the Sentinels monitor',
        'OPERATOR_API_KEYS must name at least one key',
      ]),
    );
  });

  it('lists the Redis problems of a push worker with every other problem', () => {
    const error = configErrorOf(() => loadPushWorkerConfig('fcm', { METRICS_PORT: 'x', REDIS_CLUSTER_NODES: 'node-0' }));
    expect(error.problems).toEqual(expect.arrayContaining(['METRICS_PORT must be a number, got "x"', 'REDIS_CLUSTER_NODES: "node-0" is not host:port']));
  });

  it('hands out one RedisConnection, never the variables or the password on their own', () => {
    const env = { REDIS_CLUSTER_NODES: 'node-0:6379', REDIS_PASSWORD: 'secret' };
    for (const config of [loadGatewayConfig(env), loadPushWorkerConfig('webpush', env)] as Record<string, unknown>[]) {
      expect(config.redis).toEqual({ mode: 'cluster', nodes: [{ host: 'node-0', port: 6379 }], password: 'secret', tls: false });
      expect(Object.keys(config).filter((name) => name.startsWith('REDIS_'))).toEqual([]);
      expect(config.QUEUE_PREFIX).toBe('operator');
    }
  });
});

describe('helpers', () => {
  it('parses host:port', () => {
    expect(parseAddress('redis-0.redis:6379')).toEqual({ host: 'redis-0.redis', port: 6379 });
    expect(parseAddress('[::1]:7000')).toEqual({ host: '::1', port: 7000 });
    for (const bad of ['redis', 'redis:0', 'redis:65536', '::1:7000', 'a b:1']) expect(parseAddress(bad)).toBeUndefined();
  });

  it('describes a connection without its password', () => {
    const sentinel = connectionOf({ REDIS_SENTINELS: 'a:26379,b:26379', REDIS_SENTINEL_NAME: 'mymaster', REDIS_PASSWORD: 'secret' });
    expect(describeRedis(sentinel)).toBe('master mymaster through the Sentinels a:26379,b:26379');
    expect(describeRedis(redisUrlConnection('redis://:secret@cache:6380'))).toBe('cache:6380');
    expect(() => redisUrlConnection('http://cache')).toThrow('REDIS_URL must be a redis:// or rediss:// URL');
  });
});
