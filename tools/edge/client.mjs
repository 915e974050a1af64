// What the edge check speaks with: requests from a chosen loopback address, the gateway started as
// a child process, and the tally of checks and of refusals whose body is not the error shape.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';

export const results = [];
const children = new Set();

/** Every 4xx and 5xx answer seen, and those whose body is not the CRM's error shape, {"error": string, "code": status}. */
export const refusals = { seen: 0, bad: 0, first: [] };
export function noteRefusal(status, text) {
  if (status < 400) return;
  refusals.seen += 1;
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const shaped = body !== null && typeof body === 'object' && Object.keys(body).sort().join() === 'code,error' && typeof body.error === 'string' && body.code === status;
  if (shaped) return;
  refusals.bad += 1;
  if (refusals.first.length < 5) refusals.first.push(`${status} ${text.slice(0, 120)}`);
}

export function check(name, ok, detail = '') {
  results.push({ name, ok });
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? ` (${detail})` : ''}`);
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
export const secret = () => randomBytes(32).toString('base64url');
export const freePort = () =>
  new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });

/** One request; `localAddress` makes it come from another loopback address (the throttle counts per address). */
export function request(base, path, { method = 'GET', headers = {}, body, localAddress } = {}) {
  return new Promise((resolve) => {
    const url = new URL(path, base);
    const req = http.request(url, { method, headers, localAddress, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => {
        let json;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        noteRefusal(res.statusCode, text);
        resolve({ status: res.statusCode, headers: res.headers, text, json });
      });
    });
    req.on('error', (error) => resolve({ status: 0, error: error.message }));
    req.end(body);
  });
}

export function startGateway(env) {
  const child = spawn(process.execPath, ['dist/apps/gateway/main.js'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(signal ?? code)));
  exited.then(() => children.delete(child));
  return { child, exited, output: () => output };
}

export async function until(probe, ms = 30000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await probe().catch(() => false)) return true;
    await sleep(200);
  }
  return false;
}

process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

/** "3x 401, 1x 503": how many answers had each status. */
export const tally = (answers) => {
  const counts = new Map();
  for (const { status } of answers) counts.set(status, (counts.get(status) ?? 0) + 1);
  return [...counts].map(([status, count]) => `${count}x ${status}`).join(', ');
};
