import { execFileSync } from 'node:child_process';
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

// What each app's bundle needs at run time, read from esbuild's metafile after building every app as
// `npm run build` does (tools/bundle-report.mjs): each app loads only what it uses.
const root = join(__dirname, '../../..');
const outdir = 'dist/bundle-check';

interface BundleReport {
  /** npm packages and node: modules the bundle requires, dynamic imports too. */
  requires: string[];
  /** Workspace projects its import graph reaches. */
  projects: string[];
}

let report: Record<string, BundleReport>;

beforeAll(() => {
  report = JSON.parse(execFileSync(process.execPath, ['tools/bundle-report.mjs', outdir], { cwd: root, encoding: 'utf8' }));
}, 60000);

afterAll(() => rmSync(join(root, outdir), { recursive: true, force: true }));

const PROVIDER_SDKS = ['firebase-admin', '@parse/node-apn', 'web-push'];
const PROVIDER_LIBS = readdirSync(join(root, 'libs')).filter((dir) => dir.startsWith('provider-') && dir !== 'provider-registry').map((dir) => `libs/${dir}`);
const PUSH_WORKERS = readdirSync(join(root, 'apps')).filter((dir) => dir.startsWith('push-worker-'));
// The HTTP server, its docs page and the queue dashboard.
const GATEWAY_ONLY = ['fastify', '@fastify/swagger', '@fastify/swagger-ui', '@bull-board/api', '@bull-board/fastify', '@bull-board/ui'];

// The SDK each push worker requires; firebase-admin gives the FCM provider its types only (it speaks
// HTTP/2 itself), and Push Kit and OneSignal are plain HTTPS APIs: no SDK.
const SDKS: Record<string, string[]> = { 'push-worker-apns': ['@parse/node-apn'], 'push-worker-webpush': ['web-push'] };
// Per app: the provider code it bundles (a push worker its own provider's lib) and the provider SDKs it requires.
const PROVIDERS: Record<string, { libs: string[]; sdks: string[] }> = {
  gateway: { libs: [], sdks: [] },
  ...Object.fromEntries(PUSH_WORKERS.map((app) => [app, { libs: [`libs/provider-${app.slice('push-worker-'.length)}`], sdks: SDKS[app] ?? [] }])),
  bonus: { libs: [], sdks: [] },
  'webhook-dispatcher': { libs: [], sdks: [] },
};

describe('app bundles', () => {
  it('builds every app', () => {
    expect(Object.keys(report).sort()).toEqual(Object.keys(PROVIDERS).sort());
    expect(report.gateway.requires).toContain('fastify');
    for (const app of Object.keys(PROVIDERS)) expect(report[app].projects).toContain(`apps/${app}`);
  });

  it.each(Object.entries(PROVIDERS))('%s bundles the provider code and SDKs it uses, no other', (app, expected) => {
    expect(report[app].projects.filter((project) => PROVIDER_LIBS.includes(project))).toEqual(expected.libs);
    expect(report[app].requires.filter((name) => PROVIDER_SDKS.includes(name))).toEqual(expected.sdks);
  });

  it.each(Object.keys(PROVIDERS).filter((app) => app !== 'gateway'))('%s requires none of the HTTP server, docs or dashboard packages', (app) => {
    expect(report[app].requires.filter((name) => GATEWAY_ONLY.includes(name))).toEqual([]);
  });

  it('only the webhook dispatcher bundles the dispatcher and the RabbitMQ client', () => {
    for (const app of Object.keys(PROVIDERS)) {
      const dispatcher = app === 'webhook-dispatcher';
      expect({ app, webhooks: report[app].projects.includes('libs/webhooks') }).toEqual({ app, webhooks: dispatcher });
      expect({ app, amqplib: report[app].requires.includes('amqplib') }).toEqual({ app, amqplib: dispatcher });
    }
  });
});
