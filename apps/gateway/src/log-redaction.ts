import type { FastifyRequest } from 'fastify';

/** Query parameters that carry a secret (GET /oauth/token): their values never reach a log line. */
const SECRET_PARAMETERS = new Set(['client_secret', 'access_token']);

function decodedName(name: string): string {
  try {
    return decodeURIComponent(name.replace(/\+/g, ' '));
  } catch {
    return name;
  }
}

/** `url` with the values of the secret query parameters replaced, however their names are encoded. */
export const redactedUrl = (url: string) =>
  url.replace(/([?&])([^&=#]*)=([^&#]*)/g, (parameter, separator: string, name: string) =>
    SECRET_PARAMETERS.has(decodedName(name)) ? `${separator}${name}=[Redacted]` : parameter,
  );

/** The logs' request serializer; whatever is logged as `req` need not be a request. */
export function loggedRequest(request: FastifyRequest) {
  return {
    method: request.method,
    url: typeof request.url === 'string' ? redactedUrl(request.url) : undefined,
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}
