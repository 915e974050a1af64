// `npm start` checks Redis before it starts the apps (see redis-check.ts, bundled here first, as
// the check uses the apps' own settings and client).
import { createRequire } from 'node:module';
import { bundle } from './bundle.mjs';

const require = createRequire(import.meta.url);

/** Answers null when the Redis the environment describes answers, else what went wrong, in a line. */
export async function redisProblem(env = process.env) {
  await bundle('tools/redis-check.ts', 'dist/tools/redis-check.js');
  return require('../dist/tools/redis-check.js').redisProblem(env);
}

/** A problem ends the process with one line. */
export async function ensureRedisOrExit(env = process.env) {
  const problem = await redisProblem(env);
  if (problem) {
    console.error(problem);
    process.exit(1);
  }
}
