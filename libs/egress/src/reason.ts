// What a peer said, as it may be stored and logged: its status and a short reason in plain words,
// never raw body text, which from a hostile endpoint could be markup, secrets or control characters.

const MAX_REASON = 120;

/** Printable ASCII words only, whitespace folded, at most 120 characters. */
export function sanitizeReason(text: string, max = MAX_REASON): string {
  const clean = text
    .replace(/[^\x20-\x7e]+/g, ' ')
    .replace(/[<>{}"`\\]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  return clean.length > max ? `${clean.slice(0, max - 1)}…` : clean;
}

/** A reason from a JSON error answer's usual fields, sanitised; empty when the body is not such JSON. */
export function reasonFromBody(body: Buffer | string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(typeof body === 'string' ? body : body.toString('utf8'));
  } catch {
    return '';
  }
  if (!parsed || typeof parsed !== 'object') return '';
  const value = parsed as Record<string, unknown>;
  const nested = value.error && typeof value.error === 'object' ? (value.error as Record<string, unknown>).message : undefined;
  for (const candidate of [value.reason, value.error_description, nested, value.error, value.message]) {
    if (typeof candidate === 'string' && candidate.trim()) return sanitizeReason(candidate);
  }
  return '';
}

export function answerReason(status: number, body: Buffer | string): string {
  const reason = reasonFromBody(body);
  return reason ? `HTTP ${status}: ${reason}` : `HTTP ${status}`;
}
