// Step 9 of the edge check: unauthenticated 5 MiB bodies in flight to unrouted paths and methods
// for 10 s, while the CRM sends a single push every 250 ms and the orchestrator probes /health/live.
// The gateway must neither read those bodies nor slow the CRM down.
import http from 'node:http';
import { check, noteRefusal, request, sleep, tally } from './client.mjs';

export async function floodUnrouted({ base, creditHeaders, validPush }) {
  const FLOOD_MS = 10_000;
  const big = Buffer.alloc(5 * 1024 * 1024, 'x');
  const targets = [
    ['POST', '/x'],
    ['PUT', '/channels/push/single'],
    ['POST', '/channels/push/status'],
    ['PATCH', '/bonus/credit/funds'],
    ['POST', '/v1/nothing/here'],
    ['DELETE', '/oauth/token'],
  ];
  /** Sends one 5 MiB body; answers the status, or 0 when the gateway closed before answering. */
  const flood = (method, path) =>
    new Promise((resolve) => {
      const req = http.request(new URL(path, base), { method, agent: false, localAddress: '127.0.0.7', headers: { 'content-type': 'application/json', 'content-length': big.length } }, (res) => {
        let answer = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (answer += chunk));
        res.on('end', () => {
          noteRefusal(res.statusCode, answer);
          resolve(res.statusCode);
        });
        res.on('error', () => resolve(res.statusCode));
      });
      req.on('error', () => resolve(0));
      req.end(big);
    });
  const floodStatuses = new Map();
  let floodEnd = 0;
  const floodStart = Date.now();
  const flooders = Array.from({ length: 12 }, async (_, i) => {
    for (let n = 0; Date.now() - floodStart < FLOOD_MS; n += 1) {
      const [method, path] = targets[(i + n) % targets.length];
      const status = await flood(method, path);
      floodStatuses.set(status, (floodStatuses.get(status) ?? 0) + 1);
    }
  });
  const pushes = [];
  const live = [];
  let stop = false;
  const crm = (async () => {
    while (!stop) {
      const sent = Date.now();
      const answer = await request(base, '/channels/push/single', { method: 'POST', headers: creditHeaders(), body: JSON.stringify(validPush()), localAddress: '127.0.0.3' });
      pushes.push({ status: answer.status, sent, ms: Date.now() - sent });
      await sleep(Math.max(0, 250 - (Date.now() - sent)));
    }
  })();
  const probe = (async () => {
    while (!stop) {
      live.push((await request(base, '/health/live')).status);
      await sleep(250);
    }
  })();
  await Promise.all(flooders);
  floodEnd = Date.now();
  await sleep(2500);
  stop = true;
  await Promise.all([crm, probe]);
  const during = pushes.filter((push) => push.sent < floodEnd);
  const after = pushes.filter((push) => push.sent >= floodEnd);
  const times = during.map((push) => push.ms).sort((a, b) => a - b);
  const p95 = times[Math.min(times.length - 1, Math.floor(times.length * 0.95))] ?? Infinity;
  const firstServedAfter = after.find((push) => push.status === 200);
  const servedWithinMs = firstServedAfter ? firstServedAfter.sent + firstServedAfter.ms - floodEnd : Infinity;
  check(
    '12 unauthenticated 5 MiB bodies in flight to unrouted paths for 10 s: every CRM push 200, p95 under 1 s, /health/live 200 throughout, the CRM served within 2 s of the end',
    during.length > 0 && pushes.every((push) => push.status === 200) && p95 < 1000 && live.every((status) => status === 200) && servedWithinMs <= 2000,
    `flood answers: ${[...floodStatuses].map(([status, count]) => `${count}x ${status || 'closed'}`).join(', ')}; pushes during: ${tally(during)}, p95 ${p95} ms, max ${times.at(-1)} ms; /health/live ${tally(live.map((status) => ({ status })))}; first push served ${servedWithinMs} ms after the flood`,
  );
}
