// The processes of the stack, in start order. Each is bundled to dist/apps/<name>/main.js. A push
// worker is an app folder apps/push-worker-<name> per registered provider (the registry's spec
// holds the folders to the registry).
import { readdirSync } from 'node:fs';

const PUSH_WORKERS = readdirSync(new URL('../apps/', import.meta.url)).filter((name) => name.startsWith('push-worker-')).sort();

export const APPS = ['gateway', ...PUSH_WORKERS, 'bonus', 'webhook-dispatcher'];
