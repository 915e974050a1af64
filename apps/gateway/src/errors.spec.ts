import Fastify from 'fastify';
import { registerErrorHandling } from './errors';

// A database outage is answered 503 with Retry-After wherever it is thrown from, even by a route
// that does not wrap its store calls; any other failure stays a 500 that says nothing of it.
describe('the error handler', () => {
  async function answerTo(error: Error) {
    const app = Fastify({ logger: false });
    registerErrorHandling(app);
    app.get('/', async () => {
      throw error;
    });
    const response = await app.inject({ method: 'GET', url: '/' });
    await app.close();
    return response;
  }

  it.each([
    ['a read-only node', Object.assign(new Error('cannot execute INSERT in a read-only transaction'), { code: '25006' })],
    ["PgBouncer's lost server", Object.assign(new Error('server conn crashed?'), { code: '08P01' })],
    ['a cut connection', new Error('Connection terminated unexpectedly')],
  ])('answers 503 to %s', async (_what, error) => {
    const response = await answerTo(error);
    expect(response.statusCode).toBe(503);
    expect(response.headers['retry-after']).toBe('5');
    expect(response.json()).toEqual({ error: 'store is unavailable, retry later', code: response.statusCode });
  });

  it('answers 500 to a failure that is not an outage', async () => {
    const response = await answerTo(Object.assign(new Error('duplicate key value violates unique constraint'), { code: '23505' }));
    expect(response.statusCode).toBe(500);
    expect(response.json()).toEqual({ error: 'internal error', code: response.statusCode });
  });
});
