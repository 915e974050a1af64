import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import type { ProviderName } from '@operator/contract';
import { readDeliveries } from '@operator/db';
import type { RedisOptions } from '@operator/queue';
import { INTERNAL_KEY, OPERATOR_KEY, openTestStores, TcpProxy, until, type TestStores } from '@operator/testing';
import { buildApp, buildOperationsApp } from '../app';
import { operationsApart } from '../operations';
import { sandboxSender } from './sandbox-send';

const REFUSAL = `refuse_message_${process.pid}`;

/** A gateway on the test stores, driven with fastify.inject. */
export class Harness {
  private constructor(
    readonly stores: TestStores,
    readonly app: FastifyInstance,
    /** The operations server (METRICS_PORT) of a production gateway. */
    readonly operations: FastifyInstance | undefined,
  ) {}

  static async open(env: Record<string, string> = {}, redisOptions: RedisOptions = {}) {
    const stores = await openTestStores(env, redisOptions);
    const app = buildApp(stores);
    const operations = operationsApart(stores.config) ? buildOperationsApp({ ...stores, api: app }) : undefined;
    await app.ready();
    await operations?.ready();
    return new Harness(stores, app, operations);
  }

  private sender?: ReturnType<typeof sandboxSender>;

  /** Sends these pushes as their provider's push worker would, with its sandbox. */
  send(pushIds: string[], provider: ProviderName = 'fcm') {
    this.sender ??= sandboxSender(this.stores.db, this.stores.config.TRACKING_SECRET);
    return this.sender.send(pushIds, provider);
  }

  async close() {
    await this.sender?.close();
    // The tests' fetch keeps its connections to the operations port alive; no request is in flight
    // by now, so they are cut rather than waited for (which took 20-30 s on a busy machine).
    this.operations?.server.closeAllConnections();
    await this.operations?.close();
    await this.app.close();
    await this.stores.close();
  }

  post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
    return this.app.inject({
      method: 'POST',
      url,
      headers: { 'content-type': 'application/json', 'x-api-key': OPERATOR_KEY, ...headers },
      payload: typeof body === 'string' ? body : JSON.stringify(body),
    });
  }

  single(body: unknown, headers: Record<string, string> = {}) {
    return this.post('/channels/push/single', body, headers);
  }

  batch(body: unknown, headers: Record<string, string> = {}) {
    return this.post('/channels/push/batch', body, headers);
  }

  /** A request with `key` as X-Api-Key and `body`, if any, as JSON. */
  request(key: string, method: 'GET' | 'POST' | 'DELETE', url: string, body?: unknown, headers: Record<string, string> = {}) {
    return this.app.inject({
      method,
      url,
      headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      payload: body === undefined ? undefined : JSON.stringify(body),
    });
  }

  internal(method: 'GET' | 'POST' | 'DELETE', url: string, body?: unknown) {
    return this.request(INTERNAL_KEY, method, url, body);
  }

  async registerDevice(device: Record<string, unknown>) {
    const response = await this.internal('POST', '/v1/devices', device);
    if (response.statusCode >= 300) throw new Error(`device registration failed: ${response.body}`);
    return response.json() as { id: string };
  }

  /** Every job in the provider's queue, whatever its state. */
  async jobs(provider: keyof TestStores['queues']) {
    return this.stores.queues[provider].getJobs(['wait', 'delayed', 'prioritized', 'active', 'completed', 'failed']);
  }

  /** Makes PostgreSQL refuse to insert the message with this CRM id (as a lock timeout or a failing disk page would). */
  async refuseMessage(crmMessageId: number) {
    await this.stores.db.$executeRawUnsafe(
      `CREATE OR REPLACE FUNCTION ${REFUSAL}() RETURNS trigger AS $$ BEGIN
         IF NEW.crm_message_id = ${crmMessageId} THEN RAISE EXCEPTION 'refused for the test'; END IF; RETURN NEW;
       END $$ LANGUAGE plpgsql`,
    );
    await this.stores.db.$executeRawUnsafe(`CREATE OR REPLACE TRIGGER ${REFUSAL} BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION ${REFUSAL}()`);
  }

  /** Stops refusing (see refuseMessage). */
  async allowMessages() {
    await this.stores.db.$executeRawUnsafe(`DROP TRIGGER IF EXISTS ${REFUSAL} ON messages`);
    await this.stores.db.$executeRawUnsafe(`DROP FUNCTION IF EXISTS ${REFUSAL}()`);
  }

  /** A brand's messages, each with its deliveries as push_deliveries() reads them. */
  async messageRows(brandId: number) {
    const messages = await this.stores.db.message.findMany({ where: { brandId: BigInt(brandId) } });
    const states = await readDeliveries(this.stores.db.pool, messages.map((m) => m.id));
    return messages.map((m) => ({
      ...m,
      deliveries: m.deliveryIds.map((id) => states.find((state) => state.id === id)!).map(({ id, deviceId, provider, status }) => ({ id, deviceId, provider, status })),
    }));
  }
}

/**
 * A gateway whose Redis and PostgreSQL are reached through proxies a test can cut or partition.
 * `heal()` (before each test) brings both back and waits for Redis; `close()` ends it all.
 */
export async function openBehindProxies(env: Record<string, string> = {}) {
  const redis = await TcpProxy.forUrl(process.env.REDIS_URL!).start();
  const postgres = await TcpProxy.forUrl(process.env.DATABASE_URL!).start();
  const h = await Harness.open(
    { REDIS_URL: redis.urlFor(process.env.REDIS_URL!), DATABASE_URL: postgres.urlFor(process.env.DATABASE_URL!), ...env },
    { commandTimeout: 1000 },
  );
  return {
    h,
    redis,
    postgres,
    async heal() {
      await redis.resume();
      await postgres.resume();
      await until(() => h.stores.redis.status === 'ready', 'Redis to reconnect');
    },
    async close() {
      await redis.resume();
      await postgres.resume();
      await h.close();
      await redis.stop();
      await postgres.stop();
    },
  };
}
