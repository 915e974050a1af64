import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

// The shape of the workspace, checked on every test run: each SDK is imported by one library, and
// libraries never import apps.
const root = join(__dirname, '../../..');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (name === 'node_modules' || name === 'generated') return [];
    if (statSync(path).isDirectory()) return sources(path);
    return path.endsWith('.ts') && !path.endsWith('.spec.ts') ? [path] : [];
  });
}

const files = [...sources(join(root, 'apps')), ...sources(join(root, 'libs'))].map((path) => ({
  path: relative(root, path),
  // Static imports, and dynamic ones (`import('...')`) too.
  imports: [...readFileSync(path, 'utf8').matchAll(/(?:from\s+|import\s+|import\(\s*)['"]([^'"]+)['"]/g)].map((match) => match[1]),
}));

// @prisma/client is reached only through the client Prisma generates into libs/db.
const OWNERS: Record<string, string> = {
  '@prisma/adapter-pg': 'libs/db/',
  pg: 'libs/db/',
  bullmq: 'libs/queue/',
  '@bull-board/api': 'libs/queue/',
  '@bull-board/fastify': 'libs/queue/',
  ioredis: 'libs/queue/',
  'firebase-admin': 'libs/provider-fcm/',
  '@parse/node-apn': 'libs/provider-apns/',
  'web-push': 'libs/provider-webpush/',
  'prom-client': 'libs/metrics/',
  amqplib: 'libs/webhooks/',
};

describe('module boundaries', () => {
  it('reads the workspace', () => {
    expect(files.length).toBeGreaterThan(40);
  });

  it.each(Object.entries(OWNERS))('only %s imports its SDK (%s)', (sdk, owner) => {
    const importers = files.filter((file) => file.imports.some((name) => name === sdk || name.startsWith(`${sdk}/`))).map((file) => file.path);
    expect(importers.length).toBeGreaterThan(0);
    expect(importers.filter((path) => !path.startsWith(owner))).toEqual([]);
  });

  it('keeps libraries free of app imports', () => {
    const offenders = files.filter((file) => file.path.startsWith('libs/') && file.imports.some((name) => /(^|\/)apps\//.test(name)));
    expect(offenders.map((file) => file.path)).toEqual([]);
  });

  it('imports other projects by their @operator name, never by relative path', () => {
    const offenders = files.filter((file) => file.imports.some((name) => /^\.\.\/(\.\.\/)+(libs|apps)\//.test(name) || /^\.\.\/\.\.\/[a-z-]+\/src/.test(name)));
    expect(offenders.map((file) => file.path)).toEqual([]);
  });
});
