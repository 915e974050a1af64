// Step 10 of the edge check: `count` fuzzed requests (mutated bodies, cut JSON, deep nesting,
// duplicate keys, bad encodings) answered without a 5xx, a valid push among every 1,000 served, and
// the gateway ready at the end. EDGE_SEED replays a run.
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import { check, noteRefusal, request } from './client.mjs';

export async function fuzz({ base, count, creditHeaders, validPush, gatewayPid }) {
  let seed = Number(process.env.EDGE_SEED) || Date.now() % 100000;
  const firstSeed = seed;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  const pick = (list) => list[Math.floor(random() * list.length)];
  const values = () => pick([null, true, 0, -1, 1e308, 'x', '', 'é'.repeat(300), [], {}, [[[]]], { a: { b: 1 } }, '0'.repeat(5000), 12.345678901234567, '2026-13-40']);
  const push = () => ({ activity: { id: Math.floor(random() * 1e6), brand_id: 7, user_id: 'edge-player', activity_id: 1, action_group_id: 1, trigger_hash: 'x', action_id: 1 }, title: 'T', body: 'B', meta: { a: 1 } });
  const targets = [
    ['/channels/push/single', () => push()],
    ['/channels/push/batch', () => [push(), push()]],
    ['/bonus/credit', () => ({ user_id: 'edge-player', bonus_code: 'WELCOME' })],
    ['/bonus/credit/funds', () => ({ user_id: 'edge-player', amount: 5, currency: 'EUR', type: 'cashback' })],
    ['/bonus/list', () => ({ user_id: 'edge-player' })],
  ];
  const mutate = (value, depth = 0) => {
    if (value && typeof value === 'object' && depth < 4 && random() < 0.7) {
      const copy = Array.isArray(value) ? [...value] : { ...value };
      const keys = Object.keys(copy);
      if (keys.length) {
        const key = pick(keys);
        copy[key] = random() < 0.5 ? values() : mutate(copy[key], depth + 1);
      }
      if (!Array.isArray(copy) && random() < 0.2) copy[`extra${Math.floor(random() * 5)}`] = values();
      return copy;
    }
    return values();
  };
  const text = (body) => {
    let out = JSON.stringify(body);
    const roll = random();
    if (roll < 0.1) out = out.slice(0, Math.floor(random() * out.length));
    else if (roll < 0.2 && out.startsWith('{')) out = `{"user_id":${'['.repeat(2000)}${']'.repeat(2000)},${out.slice(1)}`;
    else if (roll < 0.3 && out.startsWith('{') && out.length > 2) {
      const key = (out.match(/"([a-z_]+)":/) ?? [])[1] ?? 'x';
      out = `{"${key}":${JSON.stringify(values())},${out.slice(1)}`;
    } else if (roll < 0.35) out = Buffer.from(out).toString('latin1') + '\u00ff\ud800';
    return out;
  };
  const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
  const statuses = new Map();
  const bad = [];
  let sent = 0;
  const one = () =>
    new Promise((resolve) => {
      const [path, make] = pick(targets);
      const body = text(mutate(make()));
      const headers = creditHeaders();
      if (random() < 0.05) delete headers['x-service-id'];
      const req = http.request(new URL(path, base), { method: 'POST', headers, agent }, (res) => {
        let answer = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (answer += chunk));
        res.on('end', () => {
          noteRefusal(res.statusCode, answer);
          statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
          if (res.statusCode >= 500) bad.push(`${res.statusCode} ${path} ${body.slice(0, 200)}`);
          resolve();
        });
      });
      req.on('error', () => {
        statuses.set('network', (statuses.get('network') ?? 0) + 1);
        resolve();
      });
      req.end(body);
    });
  // A valid push every 1,000 fuzzed requests, from another address: each must be served.
  const valid = new Map();
  let nextValid = 1000;
  const started = Date.now();
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (sent < count) {
        sent += 1;
        if (sent >= nextValid) {
          nextValid += 1000;
          const answer = await request(base, '/channels/push/single', { method: 'POST', headers: creditHeaders(), body: JSON.stringify(validPush()), localAddress: '127.0.0.8' });
          valid.set(answer.status, (valid.get(answer.status) ?? 0) + 1);
        }
        await one();
      }
    }),
  );
  agent.destroy();
  const summary = [...statuses].map(([status, count]) => `${status}: ${count}`).join(', ');
  check(
    `${count} fuzzed requests (seed ${firstSeed}) answered without a 5xx (no 503 either, the stores being up), and a valid push among every 1,000 served`,
    bad.length === 0 && !statuses.has('network') && [...valid.keys()].every((status) => status === 200),
    `${((Date.now() - started) / 1000).toFixed(0)} s; ${summary}; valid pushes: ${[...valid].map(([status, count]) => `${count}x ${status}`).join(', ')}${bad.length ? `; first: ${bad[0]}` : ''}`,
  );
  const ready = await request(base, '/health/ready');
  const liveAfter = await request(base, '/health/live');
  const rss = Number(execFileSync('ps', ['-o', 'rss=', '-p', String(gatewayPid)]).toString().trim()) * 1024;
  check('/health/ready and /health/live answer 200 after the fuzz', ready.status === 200 && liveAfter.status === 200, `ready ${ready.status}, live ${liveAfter.status}; the gateway's RSS ${(rss / 2 ** 20).toFixed(0)} MiB`);
}
