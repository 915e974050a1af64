import { connect, type ChannelModel, type ConfirmChannel } from 'amqplib';
import { backoffMs, errorReason, urlOrigin, type LogSink } from '@operator/config';
import type { PostOutcome, Publish } from './poster';
import { firstOutcome } from './first-outcome';

export interface AmqpPublisherOptions {
  /** amqp:// or amqps://, with the user and password; never logged. */
  url: string;
  /** The durable topic exchange, asserted at each connection. */
  exchange: string;
  log: LogSink;
  /** Longest a publish may take, from waiting for a connection to the broker's confirm. */
  timeoutMs: number;
  /** First pause before a reconnection; it doubles up to maxReconnectMs. */
  reconnectMs?: number;
  maxReconnectMs?: number;
}

export interface AmqpPublisher {
  /**
   * Publishes each event as a message of `type` (the routing key is the type in lower case), with
   * the event's id as its messageId: delivered once the broker has confirmed it, routed to a queue.
   */
  publishAs(type: string): Publish;
  /** Resolves while the publisher is connected, with its channel open; rejects otherwise (readiness). */
  check(): Promise<void>;
  /** Closes the connection; call it once nothing is published any more. */
  close(): Promise<void>;
}

interface Link {
  connection: ChannelModel;
  channel: ConfirmChannel;
  /** The messageIds of messages the broker returned (no queue to route them to), until their confirm arrives. */
  returned: Set<string>;
}

const failed = (error: string): PostOutcome => ({ ok: false, retry: true, error, retryAfterMs: 0 });

/**
 * Publishes events to RabbitMQ on one connection and one confirm channel; each publish resolves on
 * its own confirm. Messages are persistent and mandatory: a message no queue takes is returned and,
 * like a nack, a lost connection or no confirm within timeoutMs, counts as not delivered (retried).
 * A lost connection is made again in the background, with backoff, logged once per outage.
 */
export function createAmqpPublisher(options: AmqpPublisherOptions): AmqpPublisher {
  const { log, exchange, timeoutMs } = options;
  const reconnectMs = options.reconnectMs ?? 250;
  const maxReconnectMs = options.maxReconnectMs ?? 10000;
  const broker = urlOrigin(options.url);

  let link: Link | undefined;
  let closed = false;
  /** While the broker is unreachable: since when, and the last reason. */
  let outage: { since: number; error: string } | undefined;
  let reconnecting: NodeJS.Timeout | undefined;
  let connecting = false;
  let attempt = 0;
  /** Publishes waiting for a connection. */
  let waiting: (() => void)[] = [];

  function lost(error: unknown) {
    const reason = errorReason(error ?? 'connection closed');
    if (!outage) log.warn({ broker, error: reason }, 'RabbitMQ unreachable; reconnecting with backoff');
    outage = { since: outage?.since ?? Date.now(), error: reason };
  }

  async function open(): Promise<Link> {
    const connection = await connect(options.url, { timeout: timeoutMs });
    // Each 'error' is followed by 'close', which handles it.
    connection.on('error', () => undefined);
    try {
      const channel = await connection.createConfirmChannel();
      channel.on('error', () => undefined);
      await channel.assertExchange(exchange, 'topic', { durable: true });
      const current: Link = { connection, channel, returned: new Set() };
      channel.on('return', (message) => current.returned.add(String(message.properties.messageId)));
      connection.on('close', (error?: Error) => drop(current, error));
      channel.on('close', () => drop(current, new Error('channel closed')));
      connection.on('blocked', (reason: string) => log.warn({ broker, reason }, 'RabbitMQ blocks publishing'));
      connection.on('unblocked', () => log.info({ broker }, 'RabbitMQ takes publishes again'));
      return current;
    } catch (error) {
      await connection.close().catch(() => undefined);
      throw error;
    }
  }

  async function reconnect(): Promise<void> {
    reconnecting = undefined;
    if (closed || link || connecting) return;
    connecting = true;
    try {
      const opened = await open();
      if (closed) return void (await opened.connection.close().catch(() => undefined));
      link = opened;
      attempt = 0;
      if (outage) log.info({ broker, exchange, downMs: Date.now() - outage.since }, 'RabbitMQ reachable again');
      else log.info({ broker, exchange }, 'connected to RabbitMQ');
      outage = undefined;
      for (const wake of waiting.splice(0)) wake();
    } catch (error) {
      lost(error);
      attempt += 1;
      if (!closed) reconnecting = setTimeout(() => void reconnect(), backoffMs(attempt, reconnectMs, maxReconnectMs));
    } finally {
      connecting = false;
    }
  }

  /** The link is gone (its connection or its channel closed): messages awaiting a confirm fail, and a new link is made. */
  function drop(current: Link, error?: Error) {
    if (link !== current) return;
    link = undefined;
    void current.connection.close().catch(() => undefined);
    if (closed) return;
    lost(error);
    void reconnect();
  }

  /** The open link, or the next one if it comes within `ms`. */
  async function linkWithin(ms: number): Promise<Link | undefined> {
    if (link || closed) return link;
    let wake!: () => void;
    const ready = new Promise<void>((resolve) => (wake = resolve));
    waiting.push(wake);
    const timer = setTimeout(wake, ms);
    await ready;
    clearTimeout(timer);
    waiting = waiting.filter((other) => other !== wake);
    return link;
  }

  function send(current: Link, type: string, id: string, body: string, ms: number): Promise<PostOutcome> {
    return firstOutcome(ms, () => failed(`RabbitMQ did not confirm within ${timeoutMs} ms`), (settle) => {
      const routingKey = type.toLowerCase();
      const properties = { persistent: true, mandatory: true, contentType: 'application/json', type, messageId: id };
      try {
        current.channel.publish(exchange, routingKey, Buffer.from(body), properties, (error: Error | null) => {
          const returned = current.returned.delete(id);
          if (error) settle(failed(`RabbitMQ did not take the message: ${error.message}`));
          else if (returned) settle(failed(`RabbitMQ returned the message: no queue is bound to ${exchange} for ${routingKey}`));
          else settle({ ok: true });
        });
      } catch (error) {
        settle(failed(`RabbitMQ did not take the message: ${errorReason(error)}`));
      }
    });
  }

  void reconnect();

  return {
    publishAs(type) {
      return async (event, body) => {
        const deadline = Date.now() + timeoutMs;
        const current = await linkWithin(timeoutMs);
        if (!current) return failed(`RabbitMQ unreachable${outage ? `: ${outage.error}` : ''}`);
        return send(current, type, event.id, body, Math.max(0, deadline - Date.now()));
      };
    },
    async check() {
      if (!link) throw new Error(`RabbitMQ unreachable${outage ? `: ${outage.error}` : ''}`);
    },
    async close() {
      closed = true;
      clearTimeout(reconnecting);
      for (const wake of waiting.splice(0)) wake();
      const current = link;
      link = undefined;
      await current?.connection.close().catch(() => undefined);
    },
  };
}
