// `npm start`: migrates the database, builds the apps and runs every one of them, with the
// development defaults of each app's configuration. Ctrl-C (or SIGTERM) stops them all gracefully.
import { spawn, execFileSync } from 'node:child_process';
import { APPS } from './apps.mjs';
import { DEFAULT_DATABASE_URL, ensureDatabaseOrExit, migrate } from './db-migrate.mjs';
import { DEFAULT_REDIS_URL, ensureRedisOrExit } from './redis-check.mjs';
import { seed } from './seed.mjs';

const url = process.env.DATABASE_URL || DEFAULT_DATABASE_URL;
await ensureDatabaseOrExit(url);
await ensureRedisOrExit(process.env.REDIS_URL || DEFAULT_REDIS_URL);
migrate(url);
if (process.env.NODE_ENV !== 'production') await seed(url);
execFileSync(process.execPath, ['tools/build.mjs'], { stdio: 'inherit' });

const children = new Map();
let stopping = false;

function stopAll(signal) {
  if (stopping) return;
  stopping = true;
  for (const child of children.values()) child.kill(signal);
}

for (const name of APPS) {
  const child = spawn(process.execPath, ['--enable-source-maps', `dist/apps/${name}/main.js`], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, APP_NAME: name },
  });
  children.set(name, child);
  child.on('exit', (code, signal) => {
    children.delete(name);
    if (!stopping) {
      console.error(`${name} exited (${signal ?? code}); stopping the stack`);
      process.exitCode = 1;
      stopAll('SIGTERM');
    }
    if (children.size === 0) process.exit(process.exitCode ?? 0);
  });
}

process.on('SIGINT', () => stopAll('SIGTERM'));
process.on('SIGTERM', () => stopAll('SIGTERM'));
