import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { ConnectionError, FastifyInstance } from 'fastify';
import type { GatewayConfig } from '@operator/config';

// How long a client may hold a connection: without deadlines a body trickling in a byte at a time
// holds its socket for as long as the client likes.

/** Or REQUEST_TIMEOUT_MS, if shorter. */
export const HEADERS_TIMEOUT_MS = 10_000;

/**
 * Longer than the idle timeout of the load balancers usually in front (60 s): one that sends a
 * request on a connection the gateway is closing answers the CRM 502.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 72_000;

/** How often Node looks for requests past their deadlines: its default, 30 s, would let a 30 s deadline run to a minute. */
const DEADLINE_CHECK_INTERVAL_MS = 1000;

type TimeoutConfig = Pick<GatewayConfig, 'REQUEST_TIMEOUT_MS'>;

export function serverTimeouts(config: TimeoutConfig) {
  const headersTimeoutMs = Math.min(HEADERS_TIMEOUT_MS, config.REQUEST_TIMEOUT_MS);
  const timedOut = `the request did not arrive in time: its headers must arrive within ${headersTimeoutMs} ms and the whole of it within ${config.REQUEST_TIMEOUT_MS} ms`;
  return {
    requestTimeout: config.REQUEST_TIMEOUT_MS,
    // A connection on which nothing moves for as long (a client that stops reading its answer) is closed.
    connectionTimeout: config.REQUEST_TIMEOUT_MS,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    http: { headersTimeout: headersTimeoutMs, connectionsCheckingInterval: DEADLINE_CHECK_INTERVAL_MS },
    /** Node's refusals answered like every other refusal; the connection is closed. */
    clientErrorHandler(this: FastifyInstance, error: ConnectionError, socket: Socket) {
      if (error.code === 'ECONNRESET' || socket.destroyed) return;
      const [status, message] =
        error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? [408, timedOut]
          : error.code === 'HPE_HEADER_OVERFLOW'
            ? [431, 'the request headers are too large']
            : [400, 'not a valid HTTP request'];
      this.log.debug({ err: error }, 'client error');
      if (socket.writable) {
        const body = JSON.stringify({ error: message, code: status });
        socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
      }
      socket.destroy(error);
    },
  };
}
