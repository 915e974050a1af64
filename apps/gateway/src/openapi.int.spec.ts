import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RouteOptions } from 'fastify';
import { openTestStores, type TestStores } from '@operator/testing';
import { buildApp } from './app';

// The committed openapi.json is the document the routes make, and a valid OpenAPI 3 document that
// lists every API route with each status it answers. `npm run openapi` runs this file with
// OPENAPI_WRITE=1, which rewrites openapi.json instead of comparing.

const COMMITTED = join(__dirname, '../../../openapi.json');
const HIDDEN = /^\/(docs|openapi\.json|admin|metrics)(\/|$)/;

type Operation = { responses: Record<string, unknown>; security?: Record<string, string[]>[] };
type Document = { openapi: string; paths: Record<string, Record<string, Operation>> };

/**
 * Validates an OpenAPI document with @apidevtools/swagger-parser, in a Node process of its own:
 * the parser loads an ES module that jest's CommonJS runtime cannot require, and Node can.
 */
function validateOpenApi(text: string): void {
  const dir = mkdtempSync(join(tmpdir(), 'openapi-'));
  try {
    const file = join(dir, 'openapi.json');
    writeFileSync(file, text);
    const script = "require('@apidevtools/swagger-parser').validate(process.argv[1]).catch((error) => { console.error(error.message); process.exit(1); })";
    execFileSync(process.execPath, ['-e', script, file], { stdio: 'pipe' });
  } catch (error) {
    throw new Error(`not a valid OpenAPI document: ${(error as { stderr?: Buffer }).stderr?.toString() ?? error}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** ":user_id" -> "{user_id}", as OpenAPI writes a path parameter. */
const openApiPath = (url: string) => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

/** Where two texts first differ, with a few lines of each, so a failure shows what moved. */
function firstDifference(expected: string, actual: string): string {
  const a = expected.split('\n');
  const b = actual.split('\n');
  let line = 0;
  while (line < a.length && a[line] === b[line]) line++;
  const around = (lines: string[]) => lines.slice(Math.max(0, line - 2), line + 3).join('\n');
  return `first difference at line ${line + 1}:\n--- openapi.json\n${around(a)}\n--- from the routes\n${around(b)}`;
}

describe('the OpenAPI document', () => {
  let stores: TestStores;
  let app: ReturnType<typeof buildApp>;
  const routes: RouteOptions[] = [];
  let generated: string;
  let document: Document;

  beforeAll(async () => {
    // The committed document is made with the default header word, and every CRM authentication
    // method on (so the token endpoint is in it).
    stores = await openTestStores({
      CRM_HEADER_WORD: 'Service',
      CRM_AUTH: 'api-key,basic,oauth2',
      CRM_BASIC_USERS: 'crm:password',
      CRM_OAUTH_CLIENTS: 'crm:secret',
      // The development key is refused with oauth2 outside development.
      CRM_OAUTH_SIGNING_KEYS: 'openapi-spec-signing-key-0123456789abcdef',
      ADMIN_UI: 'true',
    });
    app = buildApp(stores);
    app.addHook('onRoute', (route) => {
      routes.push(route);
    });
    await app.ready();
    document = app.swagger() as unknown as Document;
    generated = `${JSON.stringify(document, null, 2)}\n`;
  });
  afterAll(async () => {
    await app.close();
    await stores.close();
  });

  it('is the committed openapi.json (`npm run openapi` rewrites it)', () => {
    if (process.env.OPENAPI_WRITE === '1') writeFileSync(COMMITTED, generated);
    const committed = readFileSync(COMMITTED, 'utf8');
    if (committed !== generated) {
      throw new Error(`openapi.json is not the document the routes make: run \`npm run openapi\`, review the change and commit it.\n${firstDifference(committed, generated)}`);
    }
  });

  it('validates as OpenAPI 3', () => {
    expect(document.openapi).toMatch(/^3\./);
    validateOpenApi(generated);
    // And it can fail: a response without its description is refused.
    const broken = JSON.parse(generated);
    delete broken.paths['/health/live'].get.responses['200'].description;
    expect(() => validateOpenApi(JSON.stringify(broken))).toThrow(/not a valid OpenAPI document/);
  });

  it('lists every API route the gateway registers, with a response for each status it declares', () => {
    const api = routes.filter((route) => route.method !== 'HEAD' && !HIDDEN.test(route.url));
    expect(api.length).toBeGreaterThan(20);
    for (const route of api) {
      const name = `${route.method} ${route.url}`;
      const operation = document.paths[openApiPath(route.url)]?.[String(route.method).toLowerCase()];
      expect({ name, listed: operation !== undefined }).toEqual({ name, listed: true });
      const statuses = Object.keys((route.schema?.response as object | undefined) ?? {});
      expect({ name, statuses: statuses.length > 0 }).toEqual({ name, statuses: true });
      expect({ name, statuses: Object.keys(operation.responses).sort() }).toEqual({ name, statuses: statuses.sort() });
      // A route behind a key says which one, and that it answers 401 without it; one that takes an
      // admin key, that it answers 403 to a device key.
      if (operation.security?.length) expect({ name, answers401: '401' in operation.responses }).toEqual({ name, answers401: true });
      // And every route that answers 401 answers 503 with Retry-After once its caller's address has failed too often, never 429.
      if ('401' in operation.responses) expect({ name, answers503: '503' in operation.responses, answers429: '429' in operation.responses }).toEqual({ name, answers503: true, answers429: false });
      if (JSON.stringify(operation.security) === JSON.stringify([{ internalAdminKey: [] }])) {
        expect({ name, answers403: '403' in operation.responses }).toEqual({ name, answers403: true });
      }
    }
  });

  it('leaves out the pages that are no API: the docs, the document, the queue dashboard', () => {
    expect(routes.some((route) => route.url.startsWith('/docs'))).toBe(true);
    expect(routes.some((route) => route.url.startsWith('/admin/queues'))).toBe(true);
    expect(Object.keys(document.paths).filter((path) => HIDDEN.test(path))).toEqual([]);
  });

  it('names the credentials each route takes: the CRM methods for the CRM routes, a device or admin key for the devices, an admin key for the rest of /v1, none for health, device reports and the token endpoint', () => {
    const security = (path: string, method: string) => document.paths[path][method].security;
    const crm = [{ crmApiKey: [] }, { crmBasic: [] }, { crmOAuth: [] }];
    expect(security('/channels/push/single', 'post')).toEqual(crm);
    expect(security('/channels/push/status', 'get')).toEqual(crm);
    expect(security('/bonus/credit', 'post')).toEqual(crm);
    expect(security('/oauth/token', 'post')).toBeUndefined();
    expect(security('/oauth/token', 'get')).toBeUndefined();
    expect(Object.keys(document.paths['/oauth/token'].get.responses)).toContain('405');
    const devices = [{ internalDeviceKey: [] }, { internalAdminKey: [] }];
    expect(security('/v1/devices', 'post')).toEqual(devices);
    expect(security('/v1/players/{user_id}/devices', 'get')).toEqual(devices);
    expect(security('/v1/devices/{id}', 'delete')).toEqual(devices);
    expect(security('/v1/credits/{id}', 'get')).toEqual([{ internalAdminKey: [] }]);
    expect(security('/v1/players/{user_id}/bonuses/{id}/status', 'post')).toEqual([{ internalAdminKey: [] }]);
    expect(security('/v1/webhooks/dead-letters/redrive', 'post')).toEqual([{ internalAdminKey: [] }]);
    expect(security('/health/ready', 'get')).toBeUndefined();
    expect(security('/v1/push/{push_id}/events', 'post')).toBeUndefined();
  });

  it('documents the CRM headers with the default word, X-Service-Id required for credits', () => {
    const parameters = (path: string) => (document.paths[path].post as unknown as { parameters: { in: string; name: string; required: boolean }[] }).parameters;
    expect(parameters('/bonus/credit').filter((p) => p.in === 'header')).toContainEqual(expect.objectContaining({ name: 'X-Service-Id', required: true }));
    expect(parameters('/channels/push/single').filter((p) => p.in === 'header')).toContainEqual(expect.objectContaining({ name: 'X-Service-Triggerhash', required: false }));
  });

  it('is served at /openapi.json, with its page at /docs', async () => {
    const json = await app.inject({ method: 'GET', url: '/openapi.json' });
    expect(json.statusCode).toBe(200);
    expect(json.headers['content-type']).toMatch(/^application\/json/);
    expect(json.json()).toEqual(JSON.parse(generated));

    const page = await app.inject({ method: 'GET', url: '/docs' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.body).toContain('swagger-ui');
    // Its scripts come from the gateway itself, never from a CDN.
    expect(page.body).not.toMatch(/src="https?:/);
    const bundle = await app.inject({ method: 'GET', url: '/docs/static/swagger-ui-bundle.js' });
    expect(bundle.statusCode).toBe(200);
  });
});
