// Bounds on what a client may send, so that everything the gateway accepts can be stored: past
// these, a request is refused with 400 naming the field, never stored half-way or answered 500
// (which the CRM retries forever). Each number is sized against what holds the value in PostgreSQL.

/**
 * Levels of objects and arrays a value kept as sent (`meta`, unlisted fields) may nest: PostgreSQL's
 * `json` parser and JSON.stringify run out of stack some ten thousand levels down; CRM data has a few.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * A B-tree index entry must fit in a third of an 8 kB page: 2,704 bytes with its headers. Values of
 * indexed text columns are bounded in UTF-8 bytes (what PostgreSQL stores), not in characters.
 */
export const BTREE_MAX_ENTRY_BYTES = 2704;

/**
 * Each X-<Word>-* header, in UTF-8 bytes. `X-<Word>-Id` is the credits' unique idempotency key; the
 * others are stored with every message and credit. A longer value is refused, not cut: two keys
 * that differ after the cut would otherwise be taken for one.
 */
export const MAX_CRM_HEADER_BYTES = 512;

/**
 * Player ids (`user_id`), in UTF-16 characters as JSON Schema counts them: at most 3 UTF-8 bytes
 * each, so at most 765 bytes in the (brand_id, user_id), user_id and (owner, currency, kind) indexes.
 */
export const MAX_USER_ID_LENGTH = 255;

/**
 * A device token or Web Push endpoint, in UTF-8 bytes: the unique (provider, token) index holds it
 * with its provider in one entry, well under BTREE_MAX_ENTRY_BYTES. Real tokens are far shorter
 * (FCM ~160, APNs 64 hex, push service URLs a few hundred).
 */
export const MAX_DEVICE_TOKEN_BYTES = 2048;

/** The largest value of a PostgreSQL bigint, where money is kept in minor units. */
export const BIGINT_MAX = 2n ** 63n - 1n;

/**
 * The largest amount of one credit or catalog bonus, in minor units: times MAX_WAGERING_MULTIPLE
 * (10^18) it stays below BIGINT_MAX. Balances, which add up credits without end, are numeric.
 */
export const MAX_AMOUNT_MINOR = 10n ** 14n;

/** The largest wagering requirement of a catalog bonus (times the bonus amount). */
export const MAX_WAGERING_MULTIPLE = 10_000;

/**
 * The body of a route anyone may call without a key (engagement reports, /oauth/token), in bytes:
 * they carry a few hundred. Past it, 413 before parsing; BODY_LIMIT_BYTES is for the CRM's routes.
 */
export const OPEN_ROUTE_BODY_LIMIT_BYTES = 4096;
