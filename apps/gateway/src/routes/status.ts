import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import {
  BadRequest,
  errorResponse,
  isUuid,
  MAX_FEED_LIMIT,
  PushFeedQuerySchema,
  PushFeedSchema,
  PushIdParamsSchema,
  PushStatusListSchema,
  PushStatusQuerySchema,
  PushStatusSchema,
  pushEventBody,
  Unauthorized,
  Unavailable,
} from '@operator/contract';
import { readOrPrimary, readPushFeed, readPushStatus, type Db, type PushFeedPage, type PushStatusRow, type Reads } from '@operator/db';
import type { BrandSet } from '@operator/config';
import { brandFilter } from '../brands';
import { orUnavailable } from './unavailable';

const MAX_STATUS_IDS = 100;
/** How long an empty feed page waits for an older transaction, still running, that holds back events already committed. */
const FEED_HOLD_WAIT_MS = 200;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const TAGS = ['CRM: push status'];
const errors = { 401: Unauthorized, 503: Unavailable };

function statusJson(row: PushStatusRow): string {
  const head = JSON.stringify({
    push_id: row.id,
    status: row.status,
    ...(row.error ? { error: row.error } : {}),
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
    deliveries: row.deliveries,
  });
  return `${head.slice(0, -1)},"meta":${row.meta ?? '{}'}}`;
}

const sendWritten = (reply: FastifyReply, json: string) => reply.type('application/json').send(json);

/**
 * The states of `ids` of the credential's brands; those the replica does not have yet (pushes
 * accepted a moment ago) from the primary.
 */
async function readStatuses(reads: Reads, ids: string[], brands: BrandSet): Promise<PushStatusRow[]> {
  const rows = await reads.run((db) => readPushStatus(db.pool, ids, brands));
  const found = new Set(rows.map((row) => row.id));
  const missing = ids.filter((id) => !found.has(id.toLowerCase()));
  if (!reads.separate || !missing.length) return rows;
  return [...rows, ...(await readPushStatus(reads.primary.pool, missing, brands))];
}

/**
 * Neither the replica nor the primary skips an event, so the two may be read in turns. A page the
 * replica still holds back after the wait is read from the primary.
 */
async function readFeed(reads: Reads, after: bigint, limit: number, brands: BrandSet): Promise<PushFeedPage> {
  const read = (db: Db) => readPushFeed(db.pool, after, limit, brands);
  let page = await reads.run(read);
  for (const waitUntil = Date.now() + FEED_HOLD_WAIT_MS; page.held && !page.rows.length && Date.now() < waitUntil; ) {
    await sleep(10);
    page = await reads.run(read);
  }
  return page.held && !page.rows.length && reads.separate ? read(reads.primary) : page;
}

/** Polling, for a CRM that does not take webhooks. Answers are written as text (meta goes back byte for byte). */
export const statusRoutes: FastifyPluginAsyncTypebox<{ reads: Reads }> = async (app, { reads }) => {
  app.get(
    '/channels/push/status',
    {
      schema: {
        tags: TAGS,
        summary: 'The state of one or more pushes',
        querystring: PushStatusQuerySchema,
        response: { 200: PushStatusListSchema, 400: BadRequest, ...errors },
      },
    },
    async (request, reply) => {
      const raw = request.query.push_id;
      const ids = [...new Set(raw === undefined ? [] : Array.isArray(raw) ? raw : [raw])];
      if (!ids.length) return reply.code(400).send({ error: 'give one or more push_id query parameters' });
      if (ids.length > MAX_STATUS_IDS) return reply.code(400).send({ error: `at most ${MAX_STATUS_IDS} push_id at once` });
      const bad = ids.find((id) => !isUuid(id));
      // '' (push_id=) is falsy but no push id either.
      if (bad !== undefined) return reply.code(400).send({ error: `push_id ${JSON.stringify(bad)} is not a push id` });
      const rows = await orUnavailable(readStatuses(reads, ids, brandFilter(request.brands)));
      const found = new Set(rows.map((row) => row.id));
      const notFound = JSON.stringify(ids.filter((id) => !found.has(id.toLowerCase())));
      return sendWritten(reply, `{"pushes":[${rows.map(statusJson).join(',')}],"not_found":${notFound}}`);
    },
  );

  app.get(
    '/channels/push/events',
    {
      schema: {
        tags: TAGS,
        summary: 'The feed of status changes, page by page',
        querystring: PushFeedQuerySchema,
        response: { 200: PushFeedSchema, 400: BadRequest, ...errors },
      },
    },
    async (request, reply) => {
      const limit = Number(request.query.limit ?? 100);
      if (limit < 1 || limit > MAX_FEED_LIMIT) return reply.code(400).send({ error: `limit must be a number from 1 to ${MAX_FEED_LIMIT}` });
      const after = BigInt(request.query.after ?? '0');
      // Only reads: the feed's order is fixed when events are written (see readPushFeed). A credential
      // of some brands gets theirs only, and a cursor past the other brands' events it passed over.
      const { rows, next } = await orUnavailable(readFeed(reads, after, limit, brandFilter(request.brands)));
      const events = rows.map((row) => `{"cursor":"${row.feedSeq}",${pushEventBody(row).slice(1)}`);
      return sendWritten(reply, `{"events":[${events.join(',')}],"next_cursor":"${next}"}`);
    },
  );

  app.get(
    '/channels/push/:push_id',
    {
      schema: {
        tags: TAGS,
        summary: 'The state of one push',
        params: PushIdParamsSchema,
        response: { 200: PushStatusSchema, 404: errorResponse('No push has this id'), ...errors },
      },
    },
    async (request, reply) => {
      const id = request.params.push_id;
      if (!isUuid(id)) return reply.code(404).send({ error: `no push ${id}` });
      // Another brand's push is answered as one that does not exist.
      const brands = brandFilter(request.brands);
      const row = await orUnavailable(readOrPrimary(reads, async (db) => (await readPushStatus(db.pool, [id], brands))[0]));
      if (!row) return reply.code(404).send({ error: `no push ${id}` });
      return sendWritten(reply, statusJson(row));
    },
  );
};
