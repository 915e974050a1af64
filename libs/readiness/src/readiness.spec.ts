import { readiness, StoreServer, withoutServers } from './readiness';

describe('readiness', () => {
  it('is ready when every store is up, and names the servers that checks report', async () => {
    const server = { mode: 'standalone', role: 'master', address: '10.0.0.7:6379' };
    const answer = await readiness({ postgres: async () => undefined, redis: async () => new StoreServer(true, server) });
    expect(answer).toEqual({ ready: true, report: { postgres: 'up', redis: 'up', redis_server: server } });
    expect(withoutServers(answer.report)).toEqual({ postgres: 'up', redis: 'up' });
  });

  it('counts a store down when its check throws or reaches a server it cannot use', async () => {
    const replica = { mode: 'sentinel', role: 'replica', address: '10.0.0.8:6379' };
    const answer = await readiness({
      postgres: async () => {
        throw new Error('connection refused');
      },
      redis: async () => new StoreServer(false, replica),
    });
    expect(answer).toEqual({ ready: false, report: { postgres: 'down', redis: 'down', redis_server: replica } });
  });
});
