import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { v7 as uuidv7 } from 'uuid';
import type { ProviderName } from '@operator/contract';
import { setTimeout as sleep } from 'node:timers/promises';
import { pushAcceptedAt, recordEngagement, trackingToken } from '@operator/push';
import { INTERNAL_KEY, OPERATOR_KEY, fcmToken, pushRequest, uniqueBrandId, uniqueName, until } from '@operator/testing';
import { buildApp } from './app';
import { Harness } from './test/harness';

const SECRET = 'status-spec-tracking-secret';
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

interface FeedEvent {
  cursor: string;
  event_id: string;
  push_id: string;
  status: string;
  timestamp: string;
  activity: Record<string, unknown>;
  meta: unknown;
  error?: string;
}

describe('push status: polling, engagement reports and dead letters', () => {
  let h: Harness;
  let brand: number;
  let player: string;

  beforeAll(async () => {
    h = await Harness.open({ TRACKING_SECRET: SECRET });
  });
  afterAll(async () => {
    await h.close();
  });

  beforeEach(async () => {
    brand = uniqueBrandId();
    player = uniqueName('player');
    await h.registerDevice({ user_id: player, brand_id: brand, provider: 'fcm', platform: 'android', token: fcmToken() });
  });

  const get = (url: string, key: string | null = OPERATOR_KEY) =>
    h.app.inject({ method: 'GET', url, headers: key === null ? {} : { 'x-api-key': key } });

  /** Accepts `count` pushes for the player through the gateway; answers their ids. */
  async function accept(count = 1, overrides: Record<string, unknown> = {}): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const response = await h.single({ ...pushRequest(brand, player), ...overrides });
      expect(response.statusCode).toBe(200);
      ids.push(response.json().push_id);
    }
    return ids;
  }

  const send = (pushIds: string[], provider: ProviderName = 'fcm') => h.send(pushIds, provider);

  async function sentPushes(count = 1): Promise<string[]> {
    const ids = await accept(count);
    expect(await send(ids)).toMatchObject({ kind: 'done', sent: count });
    return ids;
  }

  const report = (pushId: string, body: unknown, headers: Record<string, string> = {}) =>
    h.app.inject({
      method: 'POST',
      url: `/v1/push/${pushId}/events`,
      headers: { 'content-type': 'application/json', ...headers },
      payload: JSON.stringify(body),
    });
  const engage = (pushId: string, type: string) => report(pushId, { type, token: trackingToken(SECRET, pushId) });

  const eventCount = (pushId: string) => h.stores.db.event.count({ where: { pushId } });
  const eventRows = (pushIds: string[]) =>
    h.stores.db.event.findMany({ where: { pushId: { in: pushIds }, topic: 'push.status' }, orderBy: { seq: 'asc' } });
  const statuses = async (pushId: string) => (await eventRows([pushId])).map((row) => row.status);

  /** A feed cursor before anything this test writes from now on (and after everything it wrote before). */
  async function cursorNow(): Promise<string> {
    // Events are numbered in the feed when it is read: read it once so every committed event has its number.
    expect((await get('/channels/push/events?after=999999999999999999&limit=1')).statusCode).toBe(200);
    const { _max } = await h.stores.db.event.aggregate({ _max: { feedSeq: true } });
    return (_max.feedSeq ?? 0n).toString();
  }

  async function feedPage(after: string, limit: number) {
    const response = await get(`/channels/push/events?after=${after}&limit=${limit}`);
    expect(response.statusCode).toBe(200);
    return response.json() as { events: FeedEvent[]; next_cursor: string };
  }

  /** Every feed event after `after`, page by page, until a page comes back empty. */
  async function drain(after: string, limit: number): Promise<{ events: FeedEvent[]; cursor: string }> {
    const events: FeedEvent[] = [];
    let cursor = after;
    for (let pages = 0; pages < 20000; pages++) {
      const page = await feedPage(cursor, limit);
      expect(page.events.length).toBeLessThanOrEqual(limit);
      if (!page.events.length) {
        expect(page.next_cursor).toBe(cursor);
        return { events, cursor };
      }
      expect(page.next_cursor).toBe(page.events[page.events.length - 1].cursor);
      events.push(...page.events);
      cursor = page.next_cursor;
    }
    throw new Error('the feed never ran dry');
  }

  describe('GET /channels/push/{push_id}', () => {
    it('answers accepted before sending and sent after, with each delivery', async () => {
      const [pushId] = await accept();
      const before = await get(`/channels/push/${pushId}`);
      expect(before.statusCode).toBe(200);
      expect(before.headers['content-type']).toMatch(/^application\/json/);
      const accepted = before.json();
      expect(accepted).toEqual({
        push_id: pushId,
        status: 'accepted',
        meta: { campaign: 'weekend', variant: 2 },
        created_at: expect.stringMatching(ISO),
        updated_at: expect.stringMatching(ISO),
        deliveries: [{ provider: 'fcm', status: 'pending', error: null }],
      });

      await send([pushId]);
      const sent = (await get(`/channels/push/${pushId}`)).json();
      expect(sent).toEqual({ ...accepted, status: 'sent', updated_at: expect.stringMatching(ISO), deliveries: [{ provider: 'fcm', status: 'sent', error: null }] });
      expect(sent.created_at).toBe(accepted.created_at);
      expect(Date.parse(sent.updated_at)).toBeGreaterThanOrEqual(Date.parse(accepted.updated_at));
    });

    it('answers failed with the reason when no device took the push', async () => {
      const [pushId] = await accept();
      await h.stores.db.device.updateMany({ where: { brandId: BigInt(brand), userId: player }, data: { active: false } });
      await send([pushId]);
      const response = await get(`/channels/push/${pushId}`);
      expect(response.statusCode).toBe(200);
      expect(response.json()).toMatchObject({
        push_id: pushId,
        status: 'failed',
        error: 'device-inactive',
        deliveries: [{ provider: 'fcm', status: 'failed', error: 'device-inactive' }],
      });
    });

    it('returns meta byte for byte as the CRM wrote it', async () => {
      const meta = '{ "b" : 1.0, "a": "\\u00e9", "big": 12345678901234567890 }';
      const request = JSON.stringify({ ...pushRequest(brand, player), meta: '__META__' }).replace('"__META__"', meta);
      const accepted = await h.single(request);
      expect(accepted.statusCode).toBe(200);
      const pushId = accepted.json().push_id;

      const response = await get(`/channels/push/${pushId}`);
      expect(response.statusCode).toBe(200);
      expect(response.body).toContain(`"meta":${meta}`);
      expect(response.json().meta).toEqual({ b: 1, a: 'é', big: 12345678901234567890 });

      const batch = await get(`/channels/push/status?push_id=${pushId}`);
      expect(batch.body).toContain(`"meta":${meta}`);
    });

    it('answers meta {} for a push sent without meta', async () => {
      const [pushId] = await accept(1, { meta: undefined });
      const response = await get(`/channels/push/${pushId}`);
      expect(response.statusCode).toBe(200);
      expect(response.json().meta).toEqual({});
    });

    it('answers 404 for an unknown push and for a non-uuid', async () => {
      const unknown = await get(`/channels/push/${randomUUID()}`);
      expect(unknown.statusCode).toBe(404);
      expect(unknown.json()).toEqual({ error: expect.any(String), code: unknown.statusCode });
      const garbage = await get('/channels/push/not-a-uuid');
      expect(garbage.statusCode).toBe(404);
      expect(garbage.json()).toEqual({ error: expect.any(String), code: garbage.statusCode });
    });

    it('answers 401 without the CRM key, and with the internal key', async () => {
      const [pushId] = await accept();
      const none = await get(`/channels/push/${pushId}`, null);
      expect(none.statusCode).toBe(401);
      expect(none.json()).toEqual({ error: expect.any(String), code: none.statusCode });
      expect((await get(`/channels/push/${pushId}`, INTERNAL_KEY)).statusCode).toBe(401);
      expect((await get(`/channels/push/${pushId}`, 'wrong-key')).statusCode).toBe(401);
    });
  });

  describe('GET /channels/push/status', () => {
    it('answers the pushes found and the ids not found', async () => {
      const [a, b] = await accept(2);
      await send([a]);
      const missing = randomUUID();
      const response = await get(`/channels/push/status?push_id=${a}&push_id=${b}&push_id=${missing}`);
      expect(response.statusCode).toBe(200);
      const body = response.json();
      expect(Object.keys(body).sort()).toEqual(['not_found', 'pushes']);
      const byId = new Map(body.pushes.map((p: { push_id: string }) => [p.push_id, p]));
      expect(byId.size).toBe(2);
      expect(byId.get(a)).toMatchObject({ status: 'sent', meta: { campaign: 'weekend', variant: 2 }, deliveries: [{ provider: 'fcm', status: 'sent' }] });
      expect(byId.get(b)).toMatchObject({ status: 'accepted', deliveries: [{ provider: 'fcm', status: 'pending' }] });
      expect(body.not_found).toEqual([missing]);
    });

    it('takes one id as well as several, and counts a repeated id once', async () => {
      const [a] = await accept();
      const one = await get(`/channels/push/status?push_id=${a}`);
      expect(one.json()).toMatchObject({ pushes: [{ push_id: a }], not_found: [] });
      const twice = await get(`/channels/push/status?push_id=${a}&push_id=${a}`);
      expect(twice.json().pushes).toHaveLength(1);
    });

    it('does not list an id it found as not found, whatever its letter case', async () => {
      const [a] = await accept();
      const response = await get(`/channels/push/status?push_id=${a.toUpperCase()}`);
      expect(response.statusCode).toBe(200);
      expect(response.json()).toMatchObject({ pushes: [{ push_id: a }], not_found: [] });
    });

    it('answers 400 for 101 ids, for none and for a non-uuid', async () => {
      const ids = Array.from({ length: 101 }, () => randomUUID());
      const tooMany = await get(`/channels/push/status?${ids.map((id) => `push_id=${id}`).join('&')}`);
      expect(tooMany.statusCode).toBe(400);
      expect(tooMany.json()).toEqual({ error: expect.any(String), code: tooMany.statusCode });

      const hundred = await get(`/channels/push/status?${ids.slice(0, 100).map((id) => `push_id=${id}`).join('&')}`);
      expect(hundred.statusCode).toBe(200);
      expect(hundred.json().not_found).toHaveLength(100);

      expect((await get('/channels/push/status')).statusCode).toBe(400);
      const bad = await get(`/channels/push/status?push_id=${randomUUID()}&push_id=nope`);
      expect(bad.statusCode).toBe(400);
      expect(bad.json().error).toMatch(/nope/);
    });

    it('answers 401 without the CRM key', async () => {
      expect((await get(`/channels/push/status?push_id=${randomUUID()}`, null)).statusCode).toBe(401);
      expect((await get(`/channels/push/status?push_id=${randomUUID()}`, INTERNAL_KEY)).statusCode).toBe(401);
    });
  });

  describe('GET /channels/push/events', () => {
    it('answers the events in order, each with its cursor, activity and meta', async () => {
      const from = await cursorNow();
      const [pushId] = await sentPushes();
      expect((await engage(pushId, 'opened')).statusCode).toBe(200);

      const { events, cursor } = await drain(from, 1000);
      const mine = events.filter((e) => e.push_id === pushId);
      expect(mine.map((e) => e.status)).toEqual(['sent', 'opened']);
      const rows = await eventRows([pushId]);
      const [message] = await h.messageRows(brand);
      for (const [i, event] of mine.entries()) {
        expect(Object.keys(event)).toEqual(['cursor', 'event_id', 'push_id', 'status', 'timestamp', 'activity', 'meta']);
        expect(event).toEqual({
          cursor: rows[i].feedSeq!.toString(),
          event_id: rows[i].id,
          push_id: pushId,
          status: rows[i].status,
          timestamp: rows[i].occurredAt.toISOString(),
          activity: {
            id: Number(message.crmMessageId),
            brand_id: brand,
            user_id: player,
            activity_id: 71,
            action_group_id: 72,
            action_id: 73,
            trigger_hash: message.triggerHash,
          },
          meta: { campaign: 'weekend', variant: 2 },
        });
      }
      expect(BigInt(mine[1].cursor)).toBeGreaterThan(BigInt(mine[0].cursor));
      const cursors = events.map((e) => BigInt(e.cursor));
      expect(cursors).toEqual([...cursors].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0)));
      expect(BigInt(cursor)).toBeGreaterThanOrEqual(BigInt(mine[1].cursor));
    });

    it('carries the error of a failed push', async () => {
      const from = await cursorNow();
      const [pushId] = await accept();
      await h.stores.db.device.updateMany({ where: { brandId: BigInt(brand), userId: player }, data: { active: false } });
      await send([pushId]);
      const { events } = await drain(from, 1000);
      const mine = events.filter((e) => e.push_id === pushId);
      expect(mine).toHaveLength(1);
      expect(mine[0]).toMatchObject({ status: 'failed', error: 'device-inactive' });
    });

    it('pages with limit 1 without missing or repeating an event', async () => {
      const from = await cursorNow();
      const pushIds = await sentPushes(3);
      for (const pushId of pushIds) expect((await engage(pushId, 'delivered')).statusCode).toBe(200);
      expect((await engage(pushIds[0], 'clicked')).statusCode).toBe(200);

      const { events } = await drain(from, 1);
      const mine = events.filter((e) => pushIds.includes(e.push_id));
      const rows = await eventRows(pushIds);
      expect(rows).toHaveLength(7);
      expect(mine.map((e) => e.event_id).sort()).toEqual(rows.map((r) => r.id).sort());
      expect(new Set(events.map((e) => e.event_id)).size).toBe(events.length);
      expect(new Set(events.map((e) => e.cursor)).size).toBe(events.length);
      for (const pushId of pushIds) {
        const seqOrder = rows.filter((r) => r.pushId === pushId).map((r) => r.id);
        expect(mine.filter((e) => e.push_id === pushId).map((e) => e.event_id)).toEqual(seqOrder);
      }
    });

    it('shows a poller that keeps its cursor only the later events', async () => {
      const from = await cursorNow();
      const [pushId] = await sentPushes();
      const first = await drain(from, 100);
      expect(first.events.filter((e) => e.push_id === pushId).map((e) => e.status)).toEqual(['sent']);

      expect((await engage(pushId, 'delivered')).statusCode).toBe(200);
      expect((await engage(pushId, 'clicked')).statusCode).toBe(200);
      const second = await drain(first.cursor, 100);
      expect(second.events.filter((e) => e.push_id === pushId).map((e) => e.status)).toEqual(['delivered', 'clicked']);
      expect(second.events.every((e) => BigInt(e.cursor) > BigInt(first.cursor))).toBe(true);
      const seen = new Set(first.events.map((e) => e.event_id));
      expect(second.events.some((e) => seen.has(e.event_id))).toBe(false);

      const third = await drain(second.cursor, 100);
      expect(third.events.filter((e) => e.push_id === pushId)).toEqual([]);
    });

    it('answers 400 for limit 0, limit 5000 and a cursor that is not one', async () => {
      for (const query of ['limit=0', 'limit=5000', 'limit=1001', 'limit=-1', 'limit=x', 'after=abc', 'after=-1', 'after=1.5']) {
        const response = await get(`/channels/push/events?${query}`);
        expect([query, response.statusCode]).toEqual([query, 400]);
        expect(response.json()).toEqual({ error: expect.any(String), code: response.statusCode });
      }
      expect((await get('/channels/push/events?limit=1000&after=999999999999999999')).json()).toEqual({
        events: [],
        next_cursor: '999999999999999999',
      });
    });

    it('answers 401 without the CRM key', async () => {
      expect((await get('/channels/push/events', null)).statusCode).toBe(401);
      expect((await get('/channels/push/events', INTERNAL_KEY)).statusCode).toBe(401);
    });

    it('keeps a push’s events in the order its status moved: a report waiting behind another of its push holds no transaction id yet', async () => {
      const [pushId] = await sentPushes(1);
      const from = await cursorNow();
      const first = await h.stores.db.pool.connect();
      const second = await h.stores.db.pool.connect();
      try {
        await first.query('BEGIN');
        await recordEngagement(first, pushId, 'delivered');
        await second.query('BEGIN');
        const pid = (await second.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
        const opened = recordEngagement(second, pushId, 'opened');
        const activity = async () =>
          (await h.stores.db.pool.query<{ wait: string | null; xid: string | null }>(`SELECT wait_event_type AS wait, backend_xid::text AS xid FROM pg_stat_activity WHERE pid = $1`, [pid])).rows[0];
        await until(async () => (await activity()).wait === 'Lock', 'the second report to wait for the first', 5000);
        // The feed is in transaction-id order: had it taken its id before waiting, `opened` would come first.
        expect((await activity()).xid).toBeNull();
        await first.query('COMMIT');
        expect(await opened).toEqual({ found: true, sent: true, changed: true, status: 'opened' });
        await second.query('COMMIT');
      } finally {
        first.release();
        second.release();
      }
      const events = (await feedPage(from, 100)).events.filter((event: { push_id: string }) => event.push_id === pushId);
      expect(events.map((event: { status: string }) => event.status)).toEqual(['delivered', 'opened']);
    });

    it('gives a poller every event exactly once while reports are being written concurrently', async () => {
      const pushIds = await sentPushes(12);
      const from = await cursorNow();
      const types = ['delivered', 'opened', 'clicked'];
      let writing = true;
      const collected: FeedEvent[] = [];
      let cursor = from;

      const poller = (async () => {
        for (;;) {
          const done = !writing;
          const page = await feedPage(cursor, 3);
          collected.push(...page.events);
          cursor = page.next_cursor;
          // Stop once the writers had finished before this poll began and the feed ran dry.
          if (done && !page.events.length) return;
        }
      })();

      const writers = (async () => {
        const reports = pushIds.flatMap((pushId, i) => types.map((_, j) => ({ pushId, type: types[(i + j) % types.length] })));
        const answers = await Promise.all(reports.map(({ pushId, type }) => engage(pushId, type)));
        writing = false;
        return answers;
      })();

      const [answers] = await Promise.all([writers, poller]);
      expect(answers.map((a: LightMyRequestResponse) => a.statusCode)).toEqual(Array(answers.length).fill(200));

      const rows = (await eventRows(pushIds)).filter((row) => row.status !== 'sent');
      const mine = collected.filter((e) => pushIds.includes(e.push_id));
      expect(rows.length).toBeGreaterThanOrEqual(pushIds.length);
      expect(mine.length).toBe(rows.length);
      expect(new Set(mine.map((e) => e.event_id)).size).toBe(mine.length);
      expect(mine.map((e) => e.event_id).sort()).toEqual(rows.map((r) => r.id).sort());
      expect(new Set(collected.map((e) => e.event_id)).size).toBe(collected.length);
      for (const pushId of pushIds) {
        const feedOrder = mine.filter((e) => e.push_id === pushId).map((e) => e.event_id);
        expect(feedOrder).toEqual(rows.filter((r) => r.pushId === pushId).map((r) => r.id));
      }
      // Each push's events only move forward; the changed answers match the events written.
      const changed = answers.filter((a: LightMyRequestResponse) => a.json().changed).length;
      expect(changed).toBe(rows.length);
    });
  });

  describe('POST /v1/push/{push_id}/events', () => {
    it('records a delivered report once and answers a repeat unchanged', async () => {
      const [pushId] = await sentPushes();
      expect(await eventCount(pushId)).toBe(1);

      const first = await engage(pushId, 'delivered');
      expect(first.statusCode).toBe(200);
      expect(first.json()).toEqual({ push_id: pushId, status: 'delivered', changed: true });
      expect(await statuses(pushId)).toEqual(['sent', 'delivered']);
      expect((await get(`/channels/push/${pushId}`)).json().status).toBe('delivered');

      const again = await engage(pushId, 'delivered');
      expect(again.statusCode).toBe(200);
      expect(again.json()).toEqual({ push_id: pushId, status: 'delivered', changed: false });
      expect(await eventCount(pushId)).toBe(2);
    });

    it('writes no event for a report that arrives late', async () => {
      const [pushId] = await sentPushes();
      expect((await engage(pushId, 'opened')).json()).toEqual({ push_id: pushId, status: 'opened', changed: true });
      expect((await engage(pushId, 'delivered')).json()).toEqual({ push_id: pushId, status: 'opened', changed: false });
      expect(await statuses(pushId)).toEqual(['sent', 'opened']);
    });

    it('writes one event for a click straight after the send', async () => {
      const [pushId] = await sentPushes();
      expect((await engage(pushId, 'clicked')).json()).toEqual({ push_id: pushId, status: 'clicked', changed: true });
      expect(await statuses(pushId)).toEqual(['sent', 'clicked']);
    });

    it('refuses with 409 a report of a push not sent to any device (not yet, or failed), and records nothing', async () => {
      const [accepted, failed] = await accept(2);
      for (const type of ['delivered', 'opened', 'clicked']) {
        const early = await engage(accepted, type);
        expect([type, early.statusCode]).toEqual([type, 409]);
        expect(early.json()).toMatchObject({ error: expect.stringMatching(/not sent to any device/) });
      }
      expect(await eventCount(accepted)).toBe(0);
      expect((await get(`/channels/push/${accepted}`)).json().status).toBe('accepted');

      // Once the worker recorded the send, the same report moves it; the send wrote `sent` first.
      await send([accepted]);
      expect((await engage(accepted, 'clicked')).json()).toEqual({ push_id: accepted, status: 'clicked', changed: true });
      expect(await statuses(accepted)).toEqual(['sent', 'clicked']);

      // A push that failed on every device stays failed, with its one event.
      await h.stores.db.device.updateMany({ where: { brandId: BigInt(brand), userId: player }, data: { active: false } });
      await send([failed]);
      expect(await statuses(failed)).toEqual(['failed']);
      const late = await engage(failed, 'clicked');
      expect(late.statusCode).toBe(409);
      expect(late.json()).toMatchObject({ error: expect.any(String) });
      expect(await statuses(failed)).toEqual(['failed']);
      expect((await get(`/channels/push/${failed}`)).json().status).toBe('failed');
    });

    it('refuses a bad token or another push token with 403 and records nothing', async () => {
      const [pushId, other] = await sentPushes(2);
      const bad = await report(pushId, { type: 'delivered', token: 'not-the-token' });
      expect(bad.statusCode).toBe(403);
      expect(bad.json()).toEqual({ error: expect.any(String), code: bad.statusCode });
      const almost = trackingToken(SECRET, pushId);
      const flipped = await report(pushId, { type: 'delivered', token: `${almost.slice(0, -1)}${almost.endsWith('A') ? 'B' : 'A'}` });
      expect(flipped.statusCode).toBe(403);
      const otherSecret = await report(pushId, { type: 'delivered', token: trackingToken('dev-tracking-secret', pushId) });
      expect(otherSecret.statusCode).toBe(403);
      const borrowed = await report(pushId, { type: 'clicked', token: trackingToken(SECRET, other) });
      expect(borrowed.statusCode).toBe(403);

      expect(await eventCount(pushId)).toBe(1);
      expect((await get(`/channels/push/${pushId}`)).json().status).toBe('sent');
    });

    it('answers 400 for a wrong type or a missing token', async () => {
      const [pushId] = await sentPushes();
      const token = trackingToken(SECRET, pushId);
      for (const body of [{ type: 'sent', token }, { type: 'failed', token }, { type: 'bounced', token }, { token }, { type: 'delivered' }, { type: 'delivered', token: '' }]) {
        const response = await report(pushId, body);
        expect([body, response.statusCode]).toEqual([body, 400]);
        expect(response.json()).toEqual({ error: expect.any(String), code: response.statusCode });
      }
      expect(await eventCount(pushId)).toBe(1);
    });

    it('needs no API key, and an API key does not stand in for the token', async () => {
      const [pushId] = await sentPushes();
      const withCrmKey = await report(pushId, { type: 'opened', token: 'bad' }, { 'x-api-key': OPERATOR_KEY });
      expect(withCrmKey.statusCode).toBe(403);
      const withInternalKey = await report(pushId, { type: 'opened', token: 'bad' }, { 'x-api-key': INTERNAL_KEY });
      expect(withInternalKey.statusCode).toBe(403);
      expect(await eventCount(pushId)).toBe(1);

      const noKey = await engage(pushId, 'opened');
      expect(noKey.statusCode).toBe(200);
      expect(noKey.json().changed).toBe(true);
    });

    it('accepts the push id in upper case with the token of its canonical id', async () => {
      const [pushId] = await sentPushes();
      const response = await report(pushId.toUpperCase(), { type: 'delivered', token: trackingToken(SECRET, pushId) });
      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual({ push_id: pushId, status: 'delivered', changed: true });
    });

    it('answers CORS preflight and carries the CORS header on its answers', async () => {
      const [pushId] = await sentPushes();
      const preflight = await h.app.inject({
        method: 'OPTIONS',
        url: `/v1/push/${pushId}/events`,
        headers: { origin: 'https://casino.example.test', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
      });
      expect(preflight.statusCode).toBe(204);
      expect(preflight.headers['access-control-allow-origin']).toBe('*');
      expect(String(preflight.headers['access-control-allow-methods'])).toMatch(/POST/);
      expect(String(preflight.headers['access-control-allow-headers'])).toMatch(/content-type/i);

      const ok = await report(pushId, { type: 'delivered', token: trackingToken(SECRET, pushId) }, { origin: 'https://casino.example.test' });
      expect(ok.statusCode).toBe(200);
      expect(ok.headers['access-control-allow-origin']).toBe('*');
      const refused = await report(pushId, { type: 'delivered', token: 'bad' }, { origin: 'https://casino.example.test' });
      expect(refused.statusCode).toBe(403);
      expect(refused.headers['access-control-allow-origin']).toBe('*');
    });

    it("refuses with 403 a token older than TRACKING_TOKEN_TTL, counted from the push's acceptance, and records nothing", async () => {
      const [pushId] = await sentPushes();
      const { config } = h.stores;
      const shortLived = buildApp({ ...h.stores, config: { ...config, edge: { ...config.edge, trackingTokenTtlMs: 1000 } } });
      try {
        await shortLived.ready();
        await sleep(1100 - (Date.now() - pushAcceptedAt(pushId)!));
        const expired = await shortLived.inject({
          method: 'POST',
          url: `/v1/push/${pushId}/events`,
          headers: { 'content-type': 'application/json' },
          payload: JSON.stringify({ type: 'opened', token: trackingToken(SECRET, pushId) }),
        });
        expect(expired.statusCode).toBe(403);
        expect(expired.json()).toEqual({ error: 'tracking token has expired', code: expired.statusCode });
        expect(await statuses(pushId)).toEqual(['sent']);
      } finally {
        await shortLived.close();
      }
      // The same token is taken while the push is younger than the default 30 days.
      expect((await engage(pushId, 'opened')).json()).toEqual({ push_id: pushId, status: 'opened', changed: true });
    });

    it('answers repeated and late reports of a push without a transaction, and records them once', async () => {
      const [pushId] = await sentPushes();
      expect((await engage(pushId, 'opened')).json()).toEqual({ push_id: pushId, status: 'opened', changed: true });
      const connect = jest.spyOn(h.stores.db.pool, 'connect');
      try {
        const replays = await Promise.all(Array.from({ length: 200 }, (_, i) => engage(pushId, i % 2 ? 'opened' : 'delivered')));
        expect(replays.map((reply) => reply.statusCode)).toEqual(Array(200).fill(200));
        expect(new Set(replays.map((reply) => reply.body))).toEqual(new Set([JSON.stringify({ push_id: pushId, status: 'opened', changed: false })]));
        expect(connect).not.toHaveBeenCalled();
      } finally {
        connect.mockRestore();
      }
      expect(await statuses(pushId)).toEqual(['sent', 'opened']);
      // A report that moves the push still does.
      expect((await engage(pushId, 'clicked')).json()).toEqual({ push_id: pushId, status: 'clicked', changed: true });
      expect(await statuses(pushId)).toEqual(['sent', 'opened', 'clicked']);
    });

    it('answers 404 for an unknown push, even with a token computed for it', async () => {
      // A UUIDv7 like every push id, and a UUIDv4, which no push id is.
      for (const unknown of [uuidv7(), randomUUID()]) {
        const response = await engage(unknown, 'delivered');
        expect(response.statusCode).toBe(404);
        expect(response.json()).toEqual({ error: expect.any(String), code: response.statusCode });
        expect(await eventCount(unknown)).toBe(0);
      }
    });
  });

  describe('dead letters', () => {
    const internal = (method: 'GET' | 'POST', url: string, body?: unknown) => h.internal(method, url, body);

    async function deadEvent(): Promise<{ pushId: string; id: string }> {
      const [pushId] = await sentPushes();
      const [row] = await eventRows([pushId]);
      const event = await h.stores.db.event.findFirstOrThrow({ where: { id: row.id } });
      // A dead letter is the event's row in dispatch_retries, as the dispatcher writes it.
      await h.stores.db.dispatchRetry.create({
        data: { eventId: event.id, topic: event.topic, orderingKey: event.orderingKey, seq: event.seq, state: 'dead', lastError: 'HTTP 400', attempts: 3 },
      });
      return { pushId, id: row.id };
    }

    it('lists a dead event with its details', async () => {
      const { pushId, id } = await deadEvent();
      const response = await internal('GET', '/v1/webhooks/dead-letters?limit=1000');
      expect(response.statusCode).toBe(200);
      const row = await h.stores.db.event.findFirstOrThrow({ where: { id } });
      const listed = response.json().events.find((e: { event_id: string }) => e.event_id === id);
      expect(listed).toEqual({
        event_id: id,
        topic: 'push.status',
        push_id: pushId,
        status: 'sent',
        attempts: 3,
        last_error: 'HTTP 400',
        occurred_at: row.occurredAt.toISOString(),
      });
    });

    it('redrives the given dead event: pending again with a fresh expiry', async () => {
      const { id } = await deadEvent();
      const other = await deadEvent();
      const response = await internal('POST', '/v1/webhooks/dead-letters/redrive', { event_ids: [id] });
      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual({ redriven: 1 });

      const row = await h.stores.db.dispatchRetry.findUniqueOrThrow({ where: { eventId: id } });
      expect(row.state).toBe('pending');
      expect(row.attempts).toBe(0);
      expect(row.lockedUntil).toBeNull();
      expect(row.expiresAt!.getTime()).toBeGreaterThan(Date.now());
      expect(row.nextAttemptAt.getTime()).toBeLessThanOrEqual(Date.now() + 1000);
      expect((await h.stores.db.dispatchRetry.findUniqueOrThrow({ where: { eventId: other.id } })).state).toBe('dead');

      const list = (await internal('GET', '/v1/webhooks/dead-letters?limit=1000')).json();
      expect(list.events.map((e: { event_id: string }) => e.event_id)).not.toContain(id);
      expect((await internal('POST', '/v1/webhooks/dead-letters/redrive', { event_ids: [id] })).json()).toEqual({ redriven: 0 });
    });

    it('redrives every dead event when given no ids', async () => {
      const a = await deadEvent();
      const b = await deadEvent();
      const response = await internal('POST', '/v1/webhooks/dead-letters/redrive', {});
      expect(response.statusCode).toBe(200);
      expect(response.json().redriven).toBeGreaterThanOrEqual(2);
      const rows = await h.stores.db.dispatchRetry.findMany({ where: { eventId: { in: [a.id, b.id] } } });
      expect(rows.map((r) => r.state)).toEqual(['pending', 'pending']);
      for (const row of rows) expect(row.expiresAt!.getTime()).toBeGreaterThan(Date.now());
    });

    it('answers 401 to the CRM key and without a key', async () => {
      for (const key of [OPERATOR_KEY, null]) {
        const headers: Record<string, string> = key === null ? {} : { 'x-api-key': key };
        const list = await h.app.inject({ method: 'GET', url: '/v1/webhooks/dead-letters', headers });
        expect(list.statusCode).toBe(401);
        const redrive = await h.app.inject({
          method: 'POST',
          url: '/v1/webhooks/dead-letters/redrive',
          headers: { ...headers, 'content-type': 'application/json' },
          payload: '{}',
        });
        expect(redrive.statusCode).toBe(401);
      }
    });

    it('answers 400 for an id that is not an event id', async () => {
      const { id } = await deadEvent();
      for (const ids of [['nope'], [id, 'x'.repeat(36)], ['a'.repeat(36)], ['-'.repeat(36)], 'abc']) {
        const response = await internal('POST', '/v1/webhooks/dead-letters/redrive', { event_ids: ids });
        expect([ids, response.statusCode]).toEqual([ids, 400]);
        expect(response.json()).toEqual({ error: expect.any(String), code: response.statusCode });
      }
      expect((await h.stores.db.dispatchRetry.findUniqueOrThrow({ where: { eventId: id } })).state).toBe('dead');
    });
  });
});
