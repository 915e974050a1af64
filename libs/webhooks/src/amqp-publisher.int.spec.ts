import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { connect, type Channel, type ConsumeMessage } from 'amqplib';
import { closeDb, createDb, insertEvent, type Db } from '@operator/db';
import { TcpProxy, uniqueName, until } from '@operator/testing';
import { createAmqpPublisher, type AmqpPublisher, type AmqpPublisherOptions } from './amqp-publisher';
import { createDispatcher, type Dispatcher } from './dispatcher';

// Bonus and balance events published to the local RabbitMQ (127.0.0.1:5672, guest/guest) by the
// dispatcher, over the test database. Each test has its own topics (so no other test's events are
// claimed), its own exchange and its own durable queue, read back by a consumer of its own.

const BROKER = 'amqp://guest:guest@127.0.0.1:5672';
const run = promisify(execFile);

interface Line {
  level: 'info' | 'warn' | 'error';
  details: object;
  message: string;
}

interface EventRow {
  id: string;
  body: string;
  state: 'pending' | 'delivered' | 'dead';
  attempts: number;
  lastError: string | null;
}

/** A bonus event as the bonus app writes it; odd spacing, `10.00` and a big number must come through byte for byte. */
const bonusBody = (userBonusId: string, status: string) =>
  `{"amount":10.00,"bonus_id":"FREESPINS50","currency":"EUR","exchange_rate":1,"origin":"operator","user_bonus_id":"${userBonusId}",` +
  `"user_id":"p-1","product":"Casino","status":"${status}" ,"timestamp":"2026-11-22T02:56:41.138Z","type":"FreeSpins","big":12345678901234567890}`;
const balanceBody = (userId: string, step: number) =>
  `{"balances":[{"amount":${step}.50,"currency":"EUR","key":"real_money","exchange_rate":1},{"amount":0.00,"currency":"EUR","key":"bonus_money","exchange_rate":1}],` +
  `"origin":"operator","timestamp":"2026-11-22T02:56:41.138Z","user_id":"${userId}"}`;

describe('RabbitMQ event transport (PostgreSQL, the local RabbitMQ)', () => {
  let db: Db;
  let lines: Line[];
  let bonusTopic: string;
  let balanceTopic: string;
  let exchange: string;
  let queue: string;
  const running: Dispatcher[] = [];
  const publishers: AmqpPublisher[] = [];
  const proxies: TcpProxy[] = [];

  const log = {
    info: (details: object, message: string) => lines.push({ level: 'info', details, message }),
    warn: (details: object, message: string) => lines.push({ level: 'warn', details, message }),
    error: (details: object, message: string) => lines.push({ level: 'error', details, message }),
  };

  beforeAll(async () => {
    db = createDb({ url: process.env.DATABASE_URL!, poolSize: 8 });
  });
  afterAll(() => closeDb(db));

  beforeEach(async () => {
    lines = [];
    bonusTopic = uniqueName('bonus');
    balanceTopic = uniqueName('balance');
    exchange = uniqueName('crm-events-test');
    queue = uniqueName('crm-test');
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((dispatcher) => dispatcher.stop()));
    await Promise.all(publishers.splice(0).map((publisher) => publisher.close()));
    await Promise.all(proxies.splice(0).map((proxy) => proxy.stop()));
    await onBroker(async (channel) => {
      await channel.deleteQueue(queue);
      await channel.deleteExchange(exchange);
    });
  });

  /** Runs `use` on a connection of its own (a broker restart closes every connection). */
  async function onBroker<T>(use: (channel: Channel) => Promise<T>): Promise<T> {
    const connection = await connect(BROKER);
    try {
      return await use(await connection.createChannel());
    } finally {
      await connection.close();
    }
  }

  /** The CRM's side: a durable queue bound to the exchange for both message types. */
  const bindQueue = () =>
    onBroker(async (channel) => {
      await channel.assertExchange(exchange, 'topic', { durable: true });
      await channel.assertQueue(queue, { durable: true });
      await channel.bindQueue(queue, exchange, 'bonus');
      await channel.bindQueue(queue, exchange, 'user_balances_update');
    });

  function publisher(overrides: Partial<AmqpPublisherOptions> = {}): AmqpPublisher {
    const created = createAmqpPublisher({ url: BROKER, exchange, log, timeoutMs: 2000, reconnectMs: 50, maxReconnectMs: 500, ...overrides });
    publishers.push(created);
    return created;
  }

  function start(amqp: AmqpPublisher, concurrency = 8): Dispatcher {
    const dispatcher = createDispatcher({
      db,
      log,
      urls: {},
      publishers: { [bonusTopic]: amqp.publishAs('BONUS'), [balanceTopic]: amqp.publishAs('USER_BALANCES_UPDATE') },
      secret: 'whsec-test-secret',
      auth: {},
      timeoutMs: 2000,
      concurrency,
      batchSize: 50,
      leaseMs: 10000,
      maxAgeMs: 3_600_000,
      backoffMs: 20,
      maxBackoffMs: 200,
      idleMs: 20,
    });
    running.push(dispatcher);
    dispatcher.start();
    return dispatcher;
  }

  /** Writes the events in one transaction, in this order (each bonus's statuses, each wallet's changes). */
  async function write(events: { topic: string; orderingKey: string; body: string }[]): Promise<string[]> {
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      const ids: string[] = [];
      for (const event of events) ids.push(await insertEvent(client, { ...event, status: 'event' }));
      await client.query('COMMIT');
      return ids;
    } finally {
      client.release();
    }
  }

  async function rows(): Promise<EventRow[]> {
    const { rows: found } = await db.pool.query<EventRow>(
      `SELECT e.id, e.body::text AS body, d.state, d.attempts, d.last_error AS "lastError"
         FROM events e JOIN event_dispatch d ON d.id = e.id WHERE e.topic = ANY($1::text[]) ORDER BY e.seq`,
      [[bonusTopic, balanceTopic]],
    );
    return found;
  }

  const delivered = (count: number, ms = 10000) =>
    until(async () => {
      const found = await rows();
      return found.length === count && found.every((row) => row.state === 'delivered') && found;
    }, `${count} events delivered`, ms);

  /** Everything in the queue, acknowledged; waits for `expected` messages, then a moment for any extra one. */
  const drain = (expected: number) =>
    onBroker(async (channel) => {
      const messages: ConsumeMessage[] = [];
      await channel.consume(queue, (message) => {
        if (!message) return;
        messages.push(message);
        channel.ack(message);
      });
      await until(() => messages.length >= expected, `${expected} messages in the queue`, 10000);
      await new Promise((resolve) => setTimeout(resolve, 300));
      return messages;
    });

  const connected = (amqp: AmqpPublisher) => amqp.check().then(() => true, () => false);

  const attempted = (times: number) =>
    until(async () => {
      const found = await rows();
      return (found[0]?.attempts ?? 0) >= times && found[0];
    }, `${times} attempts`);

  it('publishes each event once, persistent, with its type, routing key and id, and the body as stored', async () => {
    await bindQueue();
    const ids = await write([
      { topic: bonusTopic, orderingKey: 'bonus:b-1', body: bonusBody('b-1', 'Created') },
      { topic: balanceTopic, orderingKey: 'balance:p-1', body: balanceBody('p-1', 1) },
      { topic: bonusTopic, orderingKey: 'bonus:b-1', body: bonusBody('b-1', 'Completed') },
    ]);
    start(publisher());
    const events = await delivered(3);

    const messages = await drain(3);
    const byId = (a: { messageId: string }, b: { messageId: string }) => a.messageId.localeCompare(b.messageId);
    const expected = events.map((event) => {
      const type = event.id === ids[1] ? 'USER_BALANCES_UPDATE' : 'BONUS';
      return { exchange, routingKey: type.toLowerCase(), type, messageId: event.id, deliveryMode: 2, contentType: 'application/json', body: event.body };
    });
    expect(
      messages
        .map(({ fields, properties, content }) => ({
        exchange: fields.exchange,
        routingKey: fields.routingKey,
        type: properties.type,
        messageId: properties.messageId,
        deliveryMode: properties.deliveryMode,
        contentType: properties.contentType,
          body: content.toString('utf8'),
        }))
        .sort(byId),
    ).toEqual(expected.sort(byId));
    expect(expected[0].body).toContain('"status":"Created" ,');
    expect(events.every((event) => event.attempts === 1 && event.lastError === null)).toBe(true);
  });

  it('keeps an event that no queue is bound for pending, and delivers it once the CRM binds its queue', async () => {
    const amqp = publisher();
    await until(() => connected(amqp), 'the publisher to connect');
    const [id] = await write([{ topic: bonusTopic, orderingKey: 'bonus:b-2', body: bonusBody('b-2', 'Created') }]);
    start(amqp);
    expect(await attempted(2)).toEqual(expect.objectContaining({ state: 'pending', lastError: `RabbitMQ returned the message: no queue is bound to ${exchange} for bonus` }));

    await bindQueue();
    await delivered(1);
    expect((await drain(1)).map((message) => message.properties.messageId)).toEqual([id]);
  });

  it('counts an event delivered only once the broker confirmed it: not while it is silent or unreachable; logs the outage once, without the password', async () => {
    await bindQueue();
    const proxy = await new TcpProxy('127.0.0.1', 5672).start();
    proxies.push(proxy);
    // Each attempt waits this long for the confirm, or for the connection to come back. Short enough
    // to see the silent broker time out, long enough that the first confirm after the outage (a new
    // connection and channel, on a loaded machine) is not taken for silence: that attempt would
    // count as failed although the broker has the message, and the retry would send a second copy.
    const amqp = publisher({ url: proxy.urlFor(BROKER), timeoutMs: 1000 });
    await until(() => connected(amqp), 'the publisher to connect');

    // Silent: the connection stays open, nothing goes through.
    proxy.partition();
    const [id] = await write([{ topic: balanceTopic, orderingKey: 'balance:p-2', body: balanceBody('p-2', 7) }]);
    start(amqp);
    expect(await attempted(1)).toEqual(expect.objectContaining({ state: 'pending', lastError: 'RabbitMQ did not confirm within 1000 ms' }));

    // Unreachable: the connection is cut (what the partition held is lost with it), new ones are refused.
    await proxy.stop();
    await until(async () => !(await connected(amqp)), 'the publisher to notice');
    const waiting = await attempted(3);
    expect(waiting.state).toBe('pending');
    expect(waiting.lastError).toMatch(/^RabbitMQ unreachable: /);
    expect((await onBroker((channel) => channel.checkQueue(queue))).messageCount).toBe(0);

    await proxy.resume();
    await delivered(1);
    await amqp.check();
    expect((await drain(1)).map((message) => message.properties.messageId)).toEqual([id]);
    const outage = lines.filter((line) => line.level !== 'info' || line.message !== 'connected to RabbitMQ');
    expect(outage.map((line) => [line.level, line.message])).toEqual([
      ['warn', 'RabbitMQ unreachable; reconnecting with backoff'],
      ['info', 'RabbitMQ reachable again'],
    ]);
    expect(JSON.stringify(lines)).not.toContain('guest');
    // The broker by its origin only.
    expect(outage.map((line) => (line.details as { broker?: string }).broker)).toEqual([`amqp://127.0.0.1:${proxy.port}`, `amqp://127.0.0.1:${proxy.port}`]);
  });

  it('loses nothing and sends each event as one message across a broker restart mid-stream', async () => {
    await bindQueue();
    // Chains of one key go one event at a time, so the stream lasts long enough to be cut.
    const events = [
      ...Array.from({ length: 6 * 150 }, (_, i) => ({ topic: balanceTopic, orderingKey: `balance:p-${i % 6}`, body: balanceBody(`p-${i % 6}`, i) })),
      ...Array.from({ length: 30 * 3 }, (_, i) => {
        const bonus = `b-${i % 30}`;
        return { topic: bonusTopic, orderingKey: `bonus:${bonus}`, body: bonusBody(bonus, ['Created', 'Ongoing', 'Completed'][Math.floor(i / 30)]) };
      }),
    ];
    const concurrency = 8;
    const ids = await write(events);
    // Sends wait this long for the connection to come back: shorter than the restart, so some fail and are retried.
    start(publisher({ timeoutMs: 500 }), concurrency);

    await until(async () => (await rows()).filter((row) => row.state === 'delivered').length >= 60, 'the stream to start');
    try {
      await run('rabbitmqctl', ['stop_app']);
      expect((await rows()).filter((row) => row.state === 'pending').length).toBeGreaterThan(0);
    } finally {
      await run('rabbitmqctl', ['start_app']);
    }
    const settled = await delivered(ids.length, 40000);
    expect(settled.some((row) => row.attempts > 1)).toBe(true);

    const messages = await drain(ids.length);
    const byId = new Map<string, ConsumeMessage[]>();
    for (const message of messages) byId.set(message.properties.messageId, [...(byId.get(message.properties.messageId) ?? []), message]);
    // Nothing lost, nothing foreign.
    expect([...byId.keys()].sort()).toEqual([...ids].sort());
    // A message the broker stored but could not confirm before it closed the connection is sent
    // again, with the same messageId and body: at most those unconfirmed at the cut, one per send in flight.
    const bodies = new Map(settled.map((row) => [row.id, row.body]));
    for (const [id, copies] of byId) expect(new Set(copies.map((copy) => copy.content.toString('utf8')))).toEqual(new Set([bodies.get(id)]));
    expect(messages.length - ids.length).toBeLessThanOrEqual(concurrency);
    // Each key's events first arrive in the order they were written.
    const firstSeen = [...new Set(messages.map((message) => message.properties.messageId))];
    const keyOf = new Map(ids.map((id, i) => [id, events[i].orderingKey]));
    for (const key of new Set(events.map((event) => event.orderingKey))) {
      const written = ids.filter((id) => keyOf.get(id) === key);
      expect(firstSeen.filter((id) => keyOf.get(id) === key)).toEqual(written);
    }
    expect(lines.filter((line) => line.level === 'warn').map((line) => line.message)).toEqual(['RabbitMQ unreachable; reconnecting with backoff']);
  }, 60000);
});
