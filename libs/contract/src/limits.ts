// Bounds on what a client may send, sized against what holds each value in PostgreSQL: past them a
// request is a 400 naming the field, never a 500 (which the CRM retries forever).

/** PostgreSQL's `json` parser and JSON.stringify run out of stack some ten thousand levels down. */
export const MAX_JSON_DEPTH = 64;

/** A third of an 8 kB page; indexed text is bounded in UTF-8 bytes, as PostgreSQL stores it. */
export const BTREE_MAX_ENTRY_BYTES = 2704;

/** UTF-8 bytes. Refused, not cut: two idempotency keys that differ after the cut would be taken for one. */
export const MAX_CRM_HEADER_BYTES = 512;

/** UTF-16 characters as JSON Schema counts them: at most 765 UTF-8 bytes in an index entry. */
export const MAX_USER_ID_LENGTH = 255;

/** UTF-8 bytes, well under BTREE_MAX_ENTRY_BYTES with the provider; real tokens are far shorter. */
export const MAX_DEVICE_TOKEN_BYTES = 2048;

export const BIGINT_MAX = 2n ** 63n - 1n;

/** Times MAX_WAGERING_MULTIPLE it stays below BIGINT_MAX; balances, which add up without end, are numeric. */
export const MAX_AMOUNT_MINOR = 10n ** 14n;

export const MAX_WAGERING_MULTIPLE = 10_000;

/** Routes anyone may call without a key carry a few hundred bytes: past this, 413 before parsing. */
export const OPEN_ROUTE_BODY_LIMIT_BYTES = 4096;
