import type { Outbound, OutboundAnswer } from './http';

/** An OAuth 2.0 token answer as read: the reply, and its body as a JSON object ({} when it is not one). */
export interface TokenAnswer {
  answer: OutboundAnswer;
  json: Record<string, unknown>;
}

/**
 * An OAuth 2.0 token request (RFC 6749 §4): `fields` as a form POSTed to `url` on the house's
 * outbound client. A transport failure is thrown as `request` throws it; the caller judges the answer.
 */
export async function requestToken(
  outbound: Outbound,
  url: string,
  fields: Record<string, string>,
  limits: { timeoutMs: number; maxBodyBytes: number },
): Promise<TokenAnswer> {
  const answer = await outbound.request({
    url,
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: new URLSearchParams(fields).toString(),
    ...limits,
  });
  let json: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(answer.body.toString('utf8'));
    if (parsed !== null && typeof parsed === 'object') json = parsed as Record<string, unknown>;
  } catch {
    // Not JSON: the caller describes the answer by its status.
  }
  return { answer, json };
}
